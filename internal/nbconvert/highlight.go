package nbconvert

import (
	"fmt"
	"html"
	"sort"
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
)

// lexerFor finds the lexer of a Pygments lexer or language name; nil when there is none.
// IPython's lexers are Python's with magics, which Python's lexer shows as plain text.
func lexerFor(name string) chroma.Lexer {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return nil
	}
	if strings.HasPrefix(name, "ipython") {
		name = "python"
	}
	if l := lexers.Get(name); l != nil {
		return chroma.Coalesce(l)
	}
	return nil
}

// highlightHTML writes code as Pygments' HTML formatter does, which nbconvert's templates and
// JupyterLab's styles expect: `<div class="highlight"><pre><span></span>` and a span with
// Pygments' short class name around each token. Code without a known lexer is escaped only.
func highlightHTML(o *out, code, lang, divClass string) {
	o.w(`<div class="`, divClass, `"><pre><span></span>`)
	if !strings.HasSuffix(code, "\n") {
		// Pygments ends the last line.
		code += "\n"
	}
	lexer := lexerFor(lang)
	if lexer == nil {
		o.w(html.EscapeString(code), "</pre></div>\n")
		return
	}
	it, err := lexer.Tokenise(nil, code)
	if err != nil {
		o.w(html.EscapeString(code), "</pre></div>\n")
		return
	}
	for tok := it(); tok != chroma.EOF; tok = it() {
		if o.check() != nil {
			return
		}
		class := tokenClass(tok.Type)
		if class == "" {
			o.w(html.EscapeString(tok.Value))
			continue
		}
		o.w(`<span class="`, class, `">`, html.EscapeString(tok.Value), "</span>")
	}
	o.w("</pre></div>\n")
}

// tokenClass is a token type's Pygments class: its own, else its nearest ancestor's.
func tokenClass(t chroma.TokenType) string {
	for ; t > 0; t = t.Parent() {
		if c, ok := chroma.StandardTypes[t]; ok {
			return c
		}
		if t.Parent() == t {
			break
		}
	}
	return ""
}

var (
	highlightCSSOnce sync.Once
	highlightCSSText string
)

// highlightCSS styles the token classes under .highlight with Pygments' default colours.
func highlightCSS() string {
	highlightCSSOnce.Do(func() {
		style := styles.Get("pygments")
		var rules []string
		for t, class := range chroma.StandardTypes {
			if class == "" || t < chroma.Keyword {
				continue
			}
			e := style.Get(t)
			var decl []string
			if e.Colour.IsSet() {
				decl = append(decl, "color: "+e.Colour.String())
			}
			if e.Bold == chroma.Yes {
				decl = append(decl, "font-weight: bold")
			}
			if e.Italic == chroma.Yes {
				decl = append(decl, "font-style: italic")
			}
			if len(decl) > 0 {
				rules = append(rules, fmt.Sprintf(".highlight .%s { %s }", class, strings.Join(decl, "; ")))
			}
		}
		sort.Strings(rules)
		highlightCSSText = strings.Join(rules, "\n") + "\n"
	})
	return highlightCSSText
}
