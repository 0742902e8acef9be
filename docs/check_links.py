"""docs/check_links.py HTML_DIR: every link in the Doxygen site points at something that exists.

Run by the `docs` test after Doxygen (docs/CMakeLists.txt). For each page it checks every
relative href and src: the file must exist, and a #fragment must name an id or anchor on the
target page. Links that leave the site (http:, https:, mailto:) are not followed: CI has no
network. Prints each broken link with the page it is on, and exits 1 if there is any.
"""
import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("href", "src"):
                self.links.append(value)
            elif name in ("id", "name"):
                self.ids.add(value)


# Doxygen's own summary bar on a class page links to its sections ("Classes", "Public Member
# Functions", ...) and sometimes to one it then leaves out; those are Doxygen's, not ours.
DOXYGEN_SUMMARY_ANCHORS = {"nested-classes", "pub-methods", "pub-attribs", "pub-types", "pub-static-methods",
                           "pub-static-attribs", "related", "friends", "func-members", "typedef-members"}


def parse(path, cache):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8", errors="replace") as f:
            page.feed(f.read())
        cache[path] = page
    return cache[path]


def main():
    root = sys.argv[1]
    cache, broken, checked = {}, [], 0
    pages = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".html")]
    for page_path in sorted(pages):
        for link in parse(page_path, cache).links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or link.startswith("//") or link.startswith("javascript"):
                continue
            checked += 1
            target = os.path.normpath(os.path.join(os.path.dirname(page_path), urllib.parse.unquote(parts.path))) \
                if parts.path else page_path
            if not os.path.exists(target):
                broken.append(f"{os.path.relpath(page_path, root)}: {link} (no such file)")
            elif (parts.fragment and target.endswith(".html") and parts.fragment not in DOXYGEN_SUMMARY_ANCHORS
                  and parts.fragment not in parse(target, cache).ids):
                broken.append(f"{os.path.relpath(page_path, root)}: {link} (no anchor '{parts.fragment}')")
    for line in broken:
        print("broken link:", line)
    print(f"{checked} links in {len(pages)} pages checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
