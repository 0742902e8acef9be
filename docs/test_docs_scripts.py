"""docs/test_docs_scripts.py: the site's two helpers, tested (ctest -L docs): what
docs/markdown_filter.py does to GitHub's Markdown, and what docs/check_rendering.py catches."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from markdown_filter import convert  # noqa: E402
import check_rendering  # noqa: E402


class MarkdownFilter(unittest.TestCase):
    def test_inline_and_display_math(self):
        self.assertEqual(convert("Let $m' = \\max(m, s)$ and $c$."), "Let \\f$m' = \\max(m, s)\\f$ and \\f$c\\f$.")
        self.assertEqual(convert("so $$x^2$$ here"), "so \\f[x^2\\f] here")
        self.assertEqual(convert("a\n```math\nx = 1\n```\nb"), "a\n\\f[\nx = 1\n\\f]\nb")

    def test_dollars_that_are_not_math(self):
        for text in ["costs $5 and $6", "a $ b $", "`echo $HOME` and `$x$`", "```sh\necho $HOME $x$\n```",
                     "US$3.5"]:
            self.assertEqual(convert(text), text)

    def test_quotes_in_code_spans_get_double_backticks(self):
        self.assertEqual(convert("A tile `J'` arrives"), "A tile ``J'`` arrives")
        self.assertEqual(convert("`'n_embd' has the wrong type`"), "``'n_embd' has the wrong type``")
        self.assertEqual(convert("`it's`, ``a'b``, `plain`"), "``it's``, ``a'b``, `plain`")

    def test_local_images_are_named_by_file_name(self):
        self.assertEqual(convert("![a loss](../images/ch05-loss.png)"), "![a loss](ch05-loss.png)")
        self.assertEqual(convert("![x](docs/images/a.png) ![y](https://e.org/b.png)"),
                         "![x](a.png) ![y](https://e.org/b.png)")

    def test_lines_stay_where_they_were(self):
        text = "one `J'`\n$x$ two\n```math\ny\n```\n`a\nb'` three\n"
        self.assertEqual(convert(text).count("\n"), text.count("\n"))


KNOWN = {"frac", "sum", "max", "begin", "end", "aligned", "lvert", "rvert", "epsilon"}


class CheckRendering(unittest.TestCase):
    def page_problems(self, body):
        with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False) as f:
            f.write(f"<html><body>{body}</body></html>")
        try:
            return check_rendering.problems(f.name, KNOWN)
        finally:
            os.unlink(f.name)

    def test_a_clean_page_passes(self):
        self.assertEqual(self.page_problems(
            "<p>A tile <code>J'</code> with \\(\\frac{a}{b}\\) and</p><pre>x `y` **z**</pre>"
            "<div class='fragment'>a ** b</div><p>\\[\\begin{aligned} x \\end{aligned}\\]</p>"
            "<p>a * b, and <em>this</em> (<code>dx</code>).</p>"), [])

    def test_what_it_catches(self):
        cases = {
            "<p>A new tile `J'of keys arrives.</p>": "stray backtick",
            "<p>this is **bold** left</p>": "'**'",
            "<p>see [the chapter](ch.md) here</p>": "link or image",
            "<p>a \\f$x\\f$ left</p>": "formula left as text",
            "<p>\\(\\fraq{a}{b}\\)</p>": "does not know 'fraq'",
            "<p>\\(\\frac{a}{b\\)</p>": "unbalanced braces",
            "<p>\\(x</p>": "formulas opened",
            "<p>*<code>dweight</code> and <code>dbias</code>.* Then</p>": "'*' left unrendered",
        }
        for body, what in cases.items():
            found = self.page_problems(body)
            self.assertTrue(any(what in p for p in found), f"{body}: {found}")


if __name__ == "__main__":
    unittest.main()
