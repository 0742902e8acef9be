# serve/embed_page.cmake: cmake -DIN=page.html -DOUT=page.cpp -P embed_page.cmake writes page.cpp,
# which defines brrr::serve::page_html() as the file's text (a raw string literal).
file(READ ${IN} html)
string(FIND "${html}" ")brrr_page\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string's end marker )brrr_page\"")
endif()
file(WRITE ${OUT}.tmp "// Generated from serve/page.html by serve/embed_page.cmake: edit page.html.\n"
  "#include \"serve/page.h\"\n\nnamespace brrr::serve {\n\nstd::string_view page_html() {\n"
  "  static const char text[] = R\"brrr_page(${html})brrr_page\";\n  return {text, sizeof(text) - 1};\n}\n\n"
  "}  // namespace brrr::serve\n")
file(RENAME ${OUT}.tmp ${OUT})
