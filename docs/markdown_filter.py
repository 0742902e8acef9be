"""docs/markdown_filter.py FILE: a chapter's Markdown as GitHub reads it, rewritten for Doxygen.

Doxygen runs it on every .md it reads (FILTER_PATTERNS in docs/Doxyfile.in) and reads what
it prints; the files themselves stay as GitHub renders them. It keeps every line where it was,
so Doxygen's warnings still name the right line. Outside code blocks and code spans:
  - $x$ (GitHub's inline math) becomes Doxygen's \\f$x\\f$, and $$x$$ becomes \\f[x\\f]; a
    ```math block (GitHub's display math) becomes \\f[ ... \\f]. Doxygen hands both to MathJax.
  - An image beside the chapters, ![alt](../images/x.png), is named by its file name alone,
    ![alt](x.png): Doxygen finds it in IMAGE_PATH (docs/images) and copies it into the site;
    a path with ../ in it would be left pointing outside the site.
  - A code span in single backticks holding a quote, `J'`, goes in double backticks: Doxygen
    1.9 reads `...' as a quotation and leaves the backticks on the page.
"""
import re
import sys

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
INLINE_MATH = re.compile(r"(?<![\\$\w])\$(?=[^\s$])(.+?)(?<=[^\s\\$])\$(?![\w$])", re.S)
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
LOCAL_IMAGE = re.compile(r"(!\[[^\]]*\]\()(?![a-z]+:)(?:[^)\s]*/)?([^)/\s]+\.(?:png|svg|jpg|gif))\)")


def prose(text):
    """Rewrite a stretch of text that holds no fenced block: code spans kept, math converted."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "`":
            run = len(text) - i - len(text[i:].lstrip("`"))
            ticks = "`" * run
            end = text.find(ticks, i + run)
            # A closing run must be exactly as long as the opening one.
            while end != -1 and text[end + run:end + run + 1] == "`":
                end = text.find(ticks, end + run + 1)
            if end == -1:
                out.append(ticks)
                i += run
                continue
            body = text[i + run:end]
            if run == 1 and "'" in body:
                pad = " " if body.startswith("`") or body.endswith("`") else ""
                out.append("``" + pad + body + pad + "``")
            else:
                out.append(text[i:end + run])
            i = end + run
            continue
        # Math up to the next code span.
        j = text.find("`", i)
        j = len(text) if j == -1 else j
        chunk = DISPLAY_MATH.sub(lambda m: "\\f[" + m.group(1) + "\\f]", text[i:j])
        chunk = INLINE_MATH.sub(lambda m: "\\f$" + m.group(1) + "\\f$", chunk)
        chunk = LOCAL_IMAGE.sub(lambda m: m.group(1) + m.group(2) + ")", chunk)
        out.append(chunk)
        i = j
    return "".join(out)


def convert(source):
    lines = source.split("\n")
    out, pending, fence, math = [], [], None, False
    for line in lines:
        m = FENCE.match(line)
        if fence is None:
            if m:
                out.append(prose("\n".join(pending))) if pending else None
                pending = []
                fence = m.group(2)
                math = m.group(3) == "math"
                out.append(m.group(1) + "\\f[" if math else line)
            else:
                pending.append(line)
        else:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3):
                out.append(m.group(1) + "\\f]" if math else line)
                fence = None
            else:
                out.append(line)
    if pending:
        out.append(prose("\n".join(pending)))
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(convert(f.read()))
