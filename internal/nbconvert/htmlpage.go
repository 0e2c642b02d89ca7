package nbconvert

// mathJax loads MathJax 2 as nbconvert's pages do, with nbconvert's configuration: $...$ and
// \(...\) inline, $$...$$ and \[...\] displayed, escaped dollars and environments processed.
const mathJax = `<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=TeX-AMS_CHTML-full,Safe"> </script>
<script type="text/x-mathjax-config">
    init_mathjax = function() {
        if (window.MathJax) {
            MathJax.Hub.Config({
                TeX: {
                    equationNumbers: {
                    autoNumber: "AMS",
                    useLabelIds: true
                    }
                },
                tex2jax: {
                    inlineMath: [ ['$','$'], ["\\(","\\)"] ],
                    displayMath: [ ['$$','$$'], ["\\[","\\]"] ],
                    processEscapes: true,
                    processEnvironments: true
                },
                displayAlign: 'center',
                CommonHTML: {
                    linebreaks: {
                    automatic: true
                    }
                }
            });
            MathJax.Hub.Queue(["Typeset", MathJax.Hub]);
        }
    }
    init_mathjax();
</script>
`

// pageCSS lays out the classes of nbconvert's lab template the way JupyterLab's light theme
// shows them, in a few rules rather than JupyterLab's whole style sheet.
const pageCSS = `:root {
  --jp-cell-prompt-width: 64px;
  --jp-code-font-family: SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
  --jp-content-font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  --jp-cell-editor-background: #f7f7f7;
  --jp-cell-editor-border-color: #e0e0e0;
  --jp-cell-inprompt-font-color: #307fc1;
  --jp-cell-outprompt-font-color: #bf5b3d;
  --jp-rendermime-error-background: #fdd;
}
body.jp-Notebook { font-family: var(--jp-content-font-family); font-size: 14px; line-height: 1.5; color: rgba(0,0,0,.87); margin: 0; padding: 16px 32px; }
.jp-Cell { padding: 5px; margin: 0; }
.jp-Collapser { display: none; }
.jp-InputArea, .jp-OutputArea-child { display: table; table-layout: fixed; width: 100%; }
.jp-InputPrompt, .jp-OutputPrompt { display: table-cell; vertical-align: top; width: var(--jp-cell-prompt-width); min-width: var(--jp-cell-prompt-width); font-family: var(--jp-code-font-family); font-size: 13px; padding: 4px 8px 0 0; text-align: right; white-space: nowrap; opacity: .7; }
.jp-InputPrompt { color: var(--jp-cell-inprompt-font-color); }
.jp-OutputPrompt { color: var(--jp-cell-outprompt-font-color); }
.jp-InputArea-editor, .jp-RenderedMarkdown.jp-MarkdownOutput, .jp-OutputArea-output { display: table-cell; vertical-align: top; overflow-x: auto; }
.jp-InputArea-editor { background: var(--jp-cell-editor-background); border: 1px solid var(--jp-cell-editor-border-color); border-radius: 2px; }
.highlight { margin: 0.4em; }
pre, code { font-family: var(--jp-code-font-family); font-size: 13px; }
.jp-InputArea-editor pre, .jp-RenderedText pre { margin: 0; padding: 0; white-space: pre-wrap; word-wrap: break-word; }
.jp-RenderedText { padding: 4px 0 0 4px; }
.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"] { background: var(--jp-rendermime-error-background); }
.jp-RenderedImage img { max-width: 100%; height: auto; }
.jp-RenderedImage img.unconfined { max-width: none; }
.jp-needs-light-background { background: white; }
.jp-needs-dark-background { background: #111; }
.jp-RenderedHTMLCommon table { border-collapse: collapse; border-spacing: 0; font-size: 12px; margin: 0 0 1em 0; }
.jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { border: none; padding: 0.4em 0.8em; text-align: right; vertical-align: middle; }
.jp-RenderedHTMLCommon thead { border-bottom: 1px solid rgba(0,0,0,.3); }
.jp-RenderedHTMLCommon tbody tr:nth-child(odd) { background: #f5f5f5; }
.jp-RenderedHTMLCommon blockquote { margin: 1em 2em; padding: 0 1em; border-left: 5px solid #e0e0e0; }
.jp-RenderedHTMLCommon :not(pre) > code { background: #eee; padding: 1px 5px; }
.jp-RenderedMarkdown { padding-left: 4px; }
a.anchor-link { margin-left: .3em; text-decoration: none; visibility: hidden; }
h1:hover a.anchor-link, h2:hover a.anchor-link, h3:hover a.anchor-link, h4:hover a.anchor-link, h5:hover a.anchor-link, h6:hover a.anchor-link { visibility: visible; }
.ansi-black-fg { color: #3e424d; } .ansi-black-bg { background-color: #3e424d; }
.ansi-black-intense-fg { color: #282c36; } .ansi-black-intense-bg { background-color: #282c36; }
.ansi-red-fg { color: #e75c58; } .ansi-red-bg { background-color: #e75c58; }
.ansi-red-intense-fg { color: #b22b31; } .ansi-red-intense-bg { background-color: #b22b31; }
.ansi-green-fg { color: #00a250; } .ansi-green-bg { background-color: #00a250; }
.ansi-green-intense-fg { color: #007427; } .ansi-green-intense-bg { background-color: #007427; }
.ansi-yellow-fg { color: #ddb62b; } .ansi-yellow-bg { background-color: #ddb62b; }
.ansi-yellow-intense-fg { color: #b27d12; } .ansi-yellow-intense-bg { background-color: #b27d12; }
.ansi-blue-fg { color: #208ffb; } .ansi-blue-bg { background-color: #208ffb; }
.ansi-blue-intense-fg { color: #0065ca; } .ansi-blue-intense-bg { background-color: #0065ca; }
.ansi-magenta-fg { color: #d160c4; } .ansi-magenta-bg { background-color: #d160c4; }
.ansi-magenta-intense-fg { color: #a03196; } .ansi-magenta-intense-bg { background-color: #a03196; }
.ansi-cyan-fg { color: #60c6c8; } .ansi-cyan-bg { background-color: #60c6c8; }
.ansi-cyan-intense-fg { color: #258f8f; } .ansi-cyan-intense-bg { background-color: #258f8f; }
.ansi-white-fg { color: #c5c1b4; } .ansi-white-bg { background-color: #c5c1b4; }
.ansi-white-intense-fg { color: #a1a6b2; } .ansi-white-intense-bg { background-color: #a1a6b2; }
.ansi-default-inverse-fg { color: #fff; } .ansi-default-inverse-bg { background-color: #000; }
.ansi-bold { font-weight: bold; } .ansi-underline { text-decoration: underline; }
@media print { .jp-Cell-inputWrapper, .jp-Cell-outputWrapper { display: block; } .jp-OutputArea-child { break-inside: avoid-page; } }
`
