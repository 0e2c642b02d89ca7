#!/usr/bin/python3
"""Writes the comparison corpus: notebooks run by a real ipykernel (nbclient), so that their
outputs (ANSI tracebacks, rich display data, execute results) are what kernels send, plus
hand-made notebooks for what a kernel cannot make (attachments, raw cells, other languages).

Run from this directory: /usr/bin/python3 generate.py. bench.ipynb is the 50 KB notebook of
test/bench's notebook(), written by that function.
"""
import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAAEElEQVR4nGP4z8AARww4OQD1MQv1NXv7ggAAAABJRU5ErkJggg=="
JPEG = (
    "/9j/2wCEABALDA4MChAODQ4SERATGCgaGBYWGDEjJR0oOjM9PDkzODdASFxOQERXRTc4UG1RV19iZ2hnPk1xeXBkeFxlZ2MB"
    "ERISGBUYLxoaL2NCOEJjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY//AABEIAAYACAMB"
    "IgACEQEDEQH/xAGiAAABBQEBAQEBAQAAAAAAAAAAAQIDBAUGBwgJCgsQAAIBAwMCBAMFBQQEAAABfQECAwAEEQUSITFBBhNRYQci"
    "cRQygZGhCCNCscEVUtHwJDNicoIJChYXGBkaJSYnKCkqNDU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6g4SF"
    "hoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1tre4ubrCw8TFxsfIycrS09TV1tfY2drh4uPk5ebn6Onq8fLz9PX29/j5+gEAAwEB"
    "AQEBAQEBAQAAAAAAAAECAwQFBgcICQoLEQACAQIEBAMEBwUEBAABAncAAQIDEQQFITEGEkFRB2FxEyIygQgUQpGhscEJIzNS8BVi"
    "ctEKFiQ04SXxFxgZGiYnKCkqNTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqCg4SFhoeIiYqSk5SVlpeYmZqi"
    "o6Slpqeoqaqys7S1tre4ubrCw8TFxsfIycrS09TV1tfY2dri4+Tl5ufo6ery8/T19vf4+fr/2gAMAwEAAhEDEQA/ACw0OLjpWh/Y"
    "cXtU1h2rQrpq16nNuRgcTV9itT//2Q=="
)
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><rect width="20" height="10" fill="teal"/></svg>'


def run(name, cells, **meta):
    nb = new_notebook(cells=cells)
    nb.metadata.update(meta)
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=60).execute()
    fix_ids(nb)
    nbformat.write(nb, name)


def write(name, cells, **meta):
    nb = new_notebook(cells=cells)
    nb.metadata.update(meta)
    fix_ids(nb)
    nbformat.write(nb, name)


def fix_ids(nb):
    # Stable ids, so that regenerating the corpus changes only what changed.
    for i, c in enumerate(nb.cells):
        c["id"] = "cell-%d" % i


run("math.ipynb", [
    new_markdown_cell("# Math\n\nInline $a_1 * b_2 = c_{3}$ and $x^2$, with stars *around* $a*b*c$.\n\n"
                      "$$\n\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n$$\n\n"
                      "\\begin{equation}\nE = mc^2 \\quad a_i < b_j\n\\end{equation}\n\n"
                      "Escaped \\$5 and a price of 3 dollars."),
    new_code_cell("from IPython.display import Math, Latex\nMath(r'\\sum_{i=1}^n i = \\frac{n(n+1)}{2}')"),
    new_code_cell("Latex(r'$\\alpha + \\beta$')"),
    new_code_cell("1/3"),
])

run("images.ipynb", [
    new_markdown_cell("## Images\n\nA PNG, an SVG and a JPEG, as a kernel displays them."),
    new_code_cell("from IPython.display import Image, SVG, display\nimport base64\n"
                  "display(Image(base64.b64decode('%s')))" % PNG),
    new_code_cell("SVG('''%s''')" % SVG),
    new_code_cell("Image(base64.b64decode('%s'), format='jpeg')" % JPEG),
    new_code_cell("display(Image(base64.b64decode('%s'), width=40))\nprint('after the image')" % PNG),
])

run("errors.ipynb", [
    new_markdown_cell("Errors, ANSI colours and streams."),
    new_code_cell("def f(x):\n    return 1 / x\n\nf(0)"),
    new_code_cell("print('\\x1b[31mred\\x1b[0m \\x1b[1;32mbold green\\x1b[0m \\x1b[38;5;208morange\\x1b[0m "
                  "\\x1b[48;2;10;20;30mtruecolor bg\\x1b[0m <tag> & amp')"),
    new_code_cell("import sys\nprint('to stderr', file=sys.stderr)\nprint('to stdout')\nprint('more stdout')"),
    new_code_cell("undefined_name"),
    new_code_cell("raise ValueError('bad <value> & \"quotes\"')"),
])

run("rich.ipynb", [
    new_markdown_cell("# Rich outputs\n\n| a | b |\n|---|:-:|\n| 1 | **two** |\n| ~~old~~ | `code` |\n\n"
                      "- item one\n- item *two*\n  1. nested\n\n> quoted text\n\n"
                      "```python\ndef f():\n    return 1\n```\n\n[a link](https://jupyter.org) and <b>inline html</b>."),
    new_code_cell("from IPython.display import HTML, Markdown, JSON, Javascript, display\n"
                  "HTML('<table><tr><th>x</th></tr><tr><td>1</td></tr></table>')"),
    new_code_cell("Markdown('**bold** from the kernel')"),
    new_code_cell("display(JSON({'a': [1, 2]}))"),
    new_code_cell("Javascript('console.log(1)')"),
    new_code_cell("{'key': 'value', 'n': 3}"),
    new_code_cell(""),
    new_markdown_cell(""),
    new_code_cell("for i in range(3):\n    print(i, end=' ')\nprint()\n'done'"),
])

run("unicode.ipynb", [
    new_markdown_cell("## Ünïcödé — 日本語 — emoji 🎉\n\nRTL: שלום עולם. Combining: e\u0301."),
    new_code_cell("s = 'Grüße, 世界 🌍'\nprint(s)\ns"),
    new_code_cell("# コメント\nlen('🎉')"),
])

write("raw.ipynb", [
    new_markdown_cell("Raw cells of every format."),
    new_raw_cell("<b>raw html</b>", metadata={"raw_mimetype": "text/html"}),
    new_raw_cell("**raw markdown**", metadata={"raw_mimetype": "text/markdown"}),
    new_raw_cell("raw *rst*", metadata={"raw_mimetype": "text/restructuredtext"}),
    new_raw_cell("\\textbf{raw latex}", metadata={"raw_mimetype": "text/latex"}),
    new_raw_cell("print('raw python')", metadata={"raw_mimetype": "text/x-python"}),
    new_raw_cell("raw asciidoc", metadata={"raw_mimetype": "text/asciidoc"}),
    new_raw_cell("raw without a format"),
    new_code_cell("x = 1", execution_count=None),
])

write("attachments.ipynb", [
    new_markdown_cell("An attached image:\n\n![red dot](attachment:dot.png)\n\nand an inline one ![svg](data:image/png;base64,%s)" % PNG,
                      attachments={"dot.png": {"image/png": PNG}}),
    new_code_cell("%time x = 1\n!echo hello\nimport os\nfiles = !ls\nv = %pwd\nos.getcwd?\n", execution_count=3),
    new_code_cell("%%bash\necho from bash\n", execution_count=4),
    new_code_cell("    indented = 1\n", execution_count=None),
], language_info={"name": "python", "file_extension": ".py", "mimetype": "text/x-python",
                  "nbconvert_exporter": "python", "pygments_lexer": "ipython3"},
   kernelspec={"name": "python3", "display_name": "Python 3", "language": "python"})

write("julia.ipynb", [
    new_markdown_cell("A **Julia** notebook."),
    new_code_cell("println(\"hi\")\nx = [1, 2, 3]", execution_count=1, outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="hi\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "3-element Vector{Int64}:\n 1\n 2\n 3"}, execution_count=1),
    ]),
], language_info={"name": "julia", "file_extension": ".jl", "mimetype": "application/julia", "version": "1.9.0"},
   kernelspec={"name": "julia-1.9", "display_name": "Julia 1.9", "language": "julia"})
