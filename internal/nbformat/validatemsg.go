package nbformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// How much of an invalid instance a validation message shows, as nbformat truncates it.
const (
	truncateItems   = 16
	truncateStrings = 64
)

// validationMessage is Jupyter's message for a validation error of instance, which sits at
// prefix in the notebook; "" when err is nil.
func validationMessage(err error, instance any, prefix []string) (string, error) {
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return "", err
	}
	leaf := mostSpecific(ve, instance)
	shown, _ := json.MarshalIndent(truncate(at(instance, leaf.InstanceLocation)), "", " ")
	where := "/" + strings.Join(append(slices.Clone(prefix), leaf.InstanceLocation...), "/")
	return fmt.Sprintf("Notebook validation failed: %s at %s:\n%s", leaf.ErrorKind.LocalizedString(printer), where, shown), nil
}

var printer = message.NewPrinter(language.English)

// mostSpecific descends to the error that explains a failure. Where a cell or output matches
// none of the oneOf alternatives, it follows the alternative of the cell's or output's own
// type, as nbformat's better_validation_error does, instead of reporting the oneOf.
func mostSpecific(e *jsonschema.ValidationError, nb any) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		next := e.Causes[0]
		_, oneOf := e.ErrorKind.(*kind.OneOf)
		_, anyOf := e.ErrorKind.(*kind.AnyOf)
		if oneOf || anyOf {
			if def := definitionOf(at(nb, e.InstanceLocation)); def != "" {
				for _, c := range e.Causes {
					if mentions(c, "/definitions/"+def) {
						next = c
						break
					}
				}
			}
		}
		e = next
	}
	return e
}

func definitionOf(v any) string {
	obj, _ := v.(map[string]any)
	if t, ok := obj["cell_type"].(string); ok {
		return t + "_cell"
	}
	if t, ok := obj["output_type"].(string); ok {
		return t
	}
	return ""
}

func mentions(e *jsonschema.ValidationError, def string) bool {
	if strings.HasSuffix(e.SchemaURL, def) || strings.Contains(e.SchemaURL, def+"/") {
		return true
	}
	if ref, ok := e.ErrorKind.(*kind.Reference); ok && strings.HasSuffix(ref.URL, def) {
		return true
	}
	return slices.ContainsFunc(e.Causes, func(c *jsonschema.ValidationError) bool { return mentions(c, def) })
}

// at returns the value at a JSON pointer's tokens.
func at(v any, loc []string) any {
	for _, tok := range loc {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// truncate is nbformat's _truncate_obj: long strings, lists and objects shortened, and cell
// and output lists summarised, so that a message stays readable.
func truncate(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		out := make(map[string]any, truncateItems+1)
		for _, k := range keys[:min(len(keys), truncateItems)] {
			out[k] = truncate(x[k])
		}
		for _, k := range []string{"cells", "outputs"} {
			if l, ok := x[k].([]any); ok {
				if _, kept := out[k]; kept {
					out[k] = []any{fmt.Sprintf("...%d %s...", len(l), k)}
				}
			}
		}
		if len(keys) > truncateItems {
			out["..."] = fmt.Sprintf("%d keys truncated", len(keys)-truncateItems)
		}
		return out
	case []any:
		out := make([]any, 0, min(len(x), truncateItems)+1)
		for _, e := range x[:min(len(x), truncateItems)] {
			out = append(out, truncate(e))
		}
		if len(x) > truncateItems {
			out = append(out, fmt.Sprintf("...%d items truncated...", len(x)-truncateItems))
		}
		return out
	case string:
		if utf8.RuneCountInString(x) > truncateStrings {
			return string([]rune(x)[:truncateStrings]) + "..."
		}
	}
	return v
}
