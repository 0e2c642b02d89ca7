package nbconvert

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
)

// ansiEscape is a CSI escape sequence: ESC [ parameters final-byte.
var ansiEscape = regexp.MustCompile("\x1b\\[(.*?)([@-~])")

// ansiColors are the class names of the 16 terminal colours, as nbconvert and JupyterLab
// style them.
var ansiColors = [16]string{
	"ansi-black", "ansi-red", "ansi-green", "ansi-yellow", "ansi-blue", "ansi-magenta", "ansi-cyan", "ansi-white",
	"ansi-black-intense", "ansi-red-intense", "ansi-green-intense", "ansi-yellow-intense",
	"ansi-blue-intense", "ansi-magenta-intense", "ansi-cyan-intense", "ansi-white-intense",
}

// ansiColor is a terminal colour: unset, one of the 16 (index), or a 24-bit one.
type ansiColor struct {
	set     bool
	index   int // -1 for RGB
	r, g, b int
}

// ansiStyle is the SGR state a run of text is shown in.
type ansiStyle struct {
	fg, bg                   ansiColor
	bold, underline, inverse bool
}

func (s ansiStyle) plain() bool { return s == ansiStyle{} }

// stripANSI removes escape sequences, as nbconvert's strip_ansi.
func stripANSI(s string) string { return ansiEscape.ReplaceAllString(s, "") }

// ansiToHTML escapes s for HTML and turns its SGR colours into spans with nbconvert's ansi-*
// classes (24-bit colours as inline styles); other escape sequences are dropped.
func ansiToHTML(o *out, s string) {
	ansiRuns(o, s, func(st ansiStyle, chunk string) {
		chunk = html.EscapeString(chunk)
		if st.plain() {
			o.w(chunk)
			return
		}
		o.w(htmlStart(st), chunk, "</span>")
	})
}

// ansiToLaTeX turns SGR colours into \textcolor and \colorbox, escaping the text for a
// Verbatim environment with commandchars \{}.
func ansiToLaTeX(o *out, s string) {
	ansiRuns(o, s, func(st ansiStyle, chunk string) {
		chunk = escapeVerbatim(chunk)
		if st.plain() {
			o.w(chunk)
			return
		}
		start, end := latexStart(st)
		o.w(start, chunk, end)
	})
}

// ansiRuns splits s at its escape sequences and calls emit with each run of text and the
// style it is shown in. Bold makes the 8 normal colours intense, as terminals do.
func ansiRuns(o *out, s string, emit func(ansiStyle, string)) {
	var st ansiStyle
	for s != "" && o.check() == nil {
		loc := ansiEscape.FindStringSubmatchIndex(s)
		chunk := s
		var params string
		sgr := false
		if loc != nil {
			chunk = s[:loc[0]]
			params, sgr = s[loc[2]:loc[3]], s[loc[4]:loc[5]] == "m"
			s = s[loc[1]:]
		} else {
			s = ""
		}
		if chunk != "" {
			shown := st
			if shown.bold && shown.fg.set && shown.fg.index >= 0 && shown.fg.index < 8 {
				shown.fg.index += 8
			}
			emit(shown, chunk)
		}
		if sgr {
			st = applySGR(st, params)
		}
	}
}

// applySGR applies a Select Graphic Rendition sequence's parameters; an invalid list is
// ignored whole, as nbconvert ignores it.
func applySGR(st ansiStyle, params string) ansiStyle {
	var nums []int
	for _, p := range strings.Split(params, ";") {
		if p == "" {
			nums = append(nums, 0)
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return st
		}
		nums = append(nums, n)
	}
	for len(nums) > 0 {
		n := nums[0]
		nums = nums[1:]
		switch {
		case n == 0:
			st = ansiStyle{}
		case n == 1 || n == 5:
			st.bold = true
		case n == 4:
			st.underline = true
		case n == 7:
			st.inverse = true
		case n == 21 || n == 22:
			st.bold = false
		case n == 24:
			st.underline = false
		case n == 27:
			st.inverse = false
		case n >= 30 && n <= 37:
			st.fg = ansiColor{set: true, index: n - 30}
		case n == 38 || n == 48:
			c, rest, ok := extendedColor(nums)
			if !ok {
				return st
			}
			nums = rest
			if n == 38 {
				st.fg = c
			} else {
				st.bg = c
			}
		case n == 39:
			st.fg = ansiColor{}
		case n >= 40 && n <= 47:
			st.bg = ansiColor{set: true, index: n - 40}
		case n == 49:
			st.bg = ansiColor{}
		case n >= 90 && n <= 97:
			st.fg = ansiColor{set: true, index: n - 90 + 8}
		case n >= 100 && n <= 107:
			st.bg = ansiColor{set: true, index: n - 100 + 8}
		}
	}
	return st
}

// extendedColor reads a 256-colour (5;n) or 24-bit (2;r;g;b) colour.
func extendedColor(nums []int) (ansiColor, []int, bool) {
	if len(nums) == 0 {
		return ansiColor{}, nil, false
	}
	switch kind := nums[0]; {
	case kind == 2 && len(nums) >= 4:
		r, g, b := nums[1], nums[2], nums[3]
		for _, c := range []int{r, g, b} {
			if c < 0 || c > 255 {
				return ansiColor{}, nil, false
			}
		}
		return ansiColor{set: true, index: -1, r: r, g: g, b: b}, nums[4:], true
	case kind == 5 && len(nums) >= 2:
		idx := nums[1]
		switch {
		case idx < 0 || idx > 255:
			return ansiColor{}, nil, false
		case idx < 16:
			return ansiColor{set: true, index: idx}, nums[2:], true
		case idx < 232:
			level := func(v int) int {
				if v == 0 {
					return 0
				}
				return 55 + v*40
			}
			i := idx - 16
			return ansiColor{set: true, index: -1, r: level(i / 36), g: level(i % 36 / 6), b: level(i % 6)}, nums[2:], true
		default:
			v := (idx-232)*10 + 8
			return ansiColor{set: true, index: -1, r: v, g: v, b: v}, nums[2:], true
		}
	}
	return ansiColor{}, nil, false
}

func htmlStart(st ansiStyle) string {
	fg, bg := st.fg, st.bg
	if st.inverse {
		fg, bg = bg, fg
	}
	var classes, styles []string
	switch {
	case fg.set && fg.index >= 0:
		classes = append(classes, ansiColors[fg.index]+"-fg")
	case fg.set:
		styles = append(styles, fmt.Sprintf("color: rgb(%d,%d,%d)", fg.r, fg.g, fg.b))
	case st.inverse:
		classes = append(classes, "ansi-default-inverse-fg")
	}
	switch {
	case bg.set && bg.index >= 0:
		classes = append(classes, ansiColors[bg.index]+"-bg")
	case bg.set:
		styles = append(styles, fmt.Sprintf("background-color: rgb(%d,%d,%d)", bg.r, bg.g, bg.b))
	case st.inverse:
		classes = append(classes, "ansi-default-inverse-bg")
	}
	if st.bold {
		classes = append(classes, "ansi-bold")
	}
	if st.underline {
		classes = append(classes, "ansi-underline")
	}
	tag := "<span"
	if len(classes) > 0 {
		tag += ` class="` + strings.Join(classes, " ") + `"`
	}
	if len(styles) > 0 {
		tag += ` style="` + strings.Join(styles, "; ") + `"`
	}
	return tag + ">"
}

func latexStart(st ansiStyle) (start, end string) {
	fg, bg := st.fg, st.bg
	if st.inverse {
		fg, bg = bg, fg
	}
	switch {
	case fg.set && fg.index >= 0:
		start, end = `\textcolor{`+ansiColors[fg.index]+"}{", "}"
	case fg.set:
		start, end = fmt.Sprintf(`\textcolor[RGB]{%d,%d,%d}{`, fg.r, fg.g, fg.b), "}"
	case st.inverse:
		start, end = `\textcolor{ansi-default-inverse-fg}{`, "}"
	}
	switch {
	case bg.set && bg.index >= 0:
		start += `\setlength{\fboxsep}{0pt}\colorbox{` + ansiColors[bg.index] + "}{"
		end = `\strut}` + end
	case bg.set:
		start += fmt.Sprintf(`\setlength{\fboxsep}{0pt}\colorbox[RGB]{%d,%d,%d}{`, bg.r, bg.g, bg.b)
		end = `\strut}` + end
	case st.inverse:
		start += `\setlength{\fboxsep}{0pt}\colorbox{ansi-default-inverse-bg}{`
		end = `\strut}` + end
	}
	if st.bold {
		start += `\textbf{`
		end = "}" + end
	}
	if st.underline {
		start += `\underline{`
		end = "}" + end
	}
	return start, end
}
