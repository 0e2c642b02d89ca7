package nbconvert

import (
	"regexp"
	"strings"
)

var ellipsis = regexp.MustCompile(`\.\.\.+`)

// latexPriority is nbconvert's, less SVG: nbconvert has Inkscape turn SVG into PDF for LaTeX,
// and nbkube runs no converter, so an SVG output shows in its next representation.
var latexPriority = priority{"text/latex", "application/pdf", "image/png", "image/jpeg", "text/markdown", "text/plain"}

// exportLaTeX is nbconvert's LaTeX article: the notebook's title, code and text outputs in
// Verbatim environments (ANSI colours as colours), LaTeX outputs as written, images included
// from their files.
func exportLaTeX(nb *notebook, o *out, opts Options) (*Result, error) {
	r := &Result{Extension: ".tex", Mimetype: "text/latex"}
	files := extractOutputs(nb, r)
	title := nb.Metadata.Title
	if title == "" {
		title = opts.Name
	}
	o.w(latexPreamble, `\title{`, escapeLaTeX(title), "}\n")
	var authors []string
	for _, a := range nb.Metadata.Authors {
		authors = append(authors, a.Name)
	}
	if len(authors) > 0 {
		o.w(`\author{`, escapeLaTeX(strings.Join(authors, ", ")), "}\n")
	}
	o.w("\n\\begin{document}\n\n\\maketitle\n\n")
	for ci := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[ci]
		switch c.CellType {
		case "markdown":
			o.w(convertMarkdown(string(c.Source), latexMarkup{}), "\n")
		case "raw":
			if c.includesRaw("text/latex", "") {
				o.w(string(c.Source), "\n\n")
			}
		case "code":
			o.w(`\prompt{In}{incolor}{`, strings.TrimSpace(c.executionCount()), "}\n",
				"\\begin{Verbatim}[commandchars=\\\\\\{\\}]\n", escapeVerbatim(string(c.Source)), "\n\\end{Verbatim}\n\n")
			for oi := range c.Outputs {
				latexOutput(o, c, &c.Outputs[oi], files[[2]int{ci, oi}])
			}
		}
	}
	o.w("\n\\end{document}\n")
	return r, nil
}

func latexOutput(o *out, c *cell, out *output, files map[string]string) {
	verbatim := func(s, opts string) {
		o.w("\\begin{Verbatim}[commandchars=\\\\\\{\\}", opts, "]\n")
		ansiToLaTeX(o, strings.TrimSuffix(s, "\n"))
		o.w("\n\\end{Verbatim}\n\n")
	}
	switch out.OutputType {
	case "stream":
		verbatim(string(out.Text), "")
	case "error":
		verbatim(strings.Join(out.Traceback, "\n"), ", frame=single, framerule=2mm, rulecolor=\\color{outerrorbackground}")
	case "execute_result", "display_data":
		if out.OutputType == "execute_result" {
			o.w(`\prompt{Out}{outcolor}{`, strings.TrimSpace(c.executionCount()), "}\n")
		}
		mime := latexPriority.pick(out.Data)
		data := out.Data.str(mime)
		switch mime {
		case "text/latex":
			o.w(data, "\n\n")
		case "image/png", "image/jpeg", "application/pdf":
			o.w("\\begin{center}\n\\adjustimage{max size={0.9\\linewidth}{0.9\\paperheight}}{", files[mime], "}\n\\end{center}\n\n")
		case "text/markdown":
			o.w(convertMarkdown(data, latexMarkup{}), "\n")
		case "text/plain":
			verbatim(data, "")
		}
	}
}

// escapeVerbatim escapes text for a Verbatim environment whose command characters are \, {
// and }.
func escapeVerbatim(s string) string {
	return strings.NewReplacer(`\`, `\textbackslash{}`, "{", `\{`, "}", `\}`).Replace(s)
}

const latexPreamble = `\documentclass[11pt]{article}
\usepackage{parskip}
\usepackage{graphicx}
\usepackage[Export]{adjustbox}
\usepackage{xcolor}
\usepackage{geometry}
\usepackage{amsmath}
\usepackage{amssymb}
\usepackage{textcomp}
\usepackage{upquote}
\usepackage{iftex}
\ifPDFTeX
    \usepackage[T1]{fontenc}
    \usepackage[utf8]{inputenc}
\else
    \usepackage{fontspec}
    \usepackage{unicode-math}
\fi
\usepackage{fancyvrb}
\usepackage{hyperref}
\usepackage{longtable}
\usepackage{booktabs}
\usepackage[normalem]{ulem}
\definecolor{incolor}{HTML}{303F9F}
\definecolor{outcolor}{HTML}{D84315}
\definecolor{ansi-black}{HTML}{3E424D}
\definecolor{ansi-black-intense}{HTML}{282C36}
\definecolor{ansi-red}{HTML}{E75C58}
\definecolor{ansi-red-intense}{HTML}{B22B31}
\definecolor{ansi-green}{HTML}{00A250}
\definecolor{ansi-green-intense}{HTML}{007427}
\definecolor{ansi-yellow}{HTML}{DDB62B}
\definecolor{ansi-yellow-intense}{HTML}{B27D12}
\definecolor{ansi-blue}{HTML}{208FFB}
\definecolor{ansi-blue-intense}{HTML}{0065CA}
\definecolor{ansi-magenta}{HTML}{D160C4}
\definecolor{ansi-magenta-intense}{HTML}{A03196}
\definecolor{ansi-cyan}{HTML}{60C6C8}
\definecolor{ansi-cyan-intense}{HTML}{258F8F}
\definecolor{ansi-white}{HTML}{C5C1B4}
\definecolor{ansi-white-intense}{HTML}{A1A6B2}
\definecolor{ansi-default-inverse-fg}{HTML}{FFFFFF}
\definecolor{ansi-default-inverse-bg}{HTML}{000000}
\definecolor{outerrorbackground}{HTML}{FFDFDF}
\providecommand{\tightlist}{\setlength{\itemsep}{0pt}\setlength{\parskip}{0pt}}
\newcommand{\prompt}[3]{\llap{{\color{#2}[#3]:\hspace{3pt}}}\vspace{-\baselineskip}}
\geometry{verbose,tmargin=1in,bmargin=1in,lmargin=1in,rmargin=1in}
`
