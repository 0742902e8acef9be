// serve/page.h: the page brrr serve shows at GET / (chapter 20). Its text is serve/page.html,
// built into the library by serve/embed_page.cmake, so it needs no file and no network.
#pragma once
#include <string_view>

namespace brrr::serve {
std::string_view page_html();
}  // namespace brrr::serve
