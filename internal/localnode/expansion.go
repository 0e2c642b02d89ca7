package localnode

import (
	"strings"
	"unicode/utf8"
)

// expand replaces each $(NAME) in s with lookup(NAME), with the semantics of the kubelet's
// k8s.io/kubernetes/third_party/forked/golang/expansion (not a dependency of ours): "$$" is an
// escaped "$", a reference to an unknown name and an unterminated "$(" stay as they are, and a "$"
// before anything else is kept with what follows it.
func expand(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i+1:])
		switch r {
		case '$':
			b.WriteByte('$')
			i += 2
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i += 2
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end + 1
		default:
			b.WriteString(s[i : i+1+size])
			i += 1 + size
		}
	}
	return b.String()
}
