package localnode

import "testing"

func TestExpand_FollowsKubernetesVariableExpansion(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
	lookup := func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
	tests := []struct{ in, want string }{
		{in: "$(VAR_A)", want: "A"},
		{in: "$(VAR_A)-$(VAR_A)", want: "A-A"},
		{in: "___$(VAR_B)___", want: "___B___"},
		{in: "$(VAR_A)_$(VAR_B)_$(VAR_C)", want: "A_B_C"},
		{in: "$$(VAR_B)_$(VAR_A)", want: "$(VAR_B)_A"},
		{in: "$$(VAR_A)_$$(VAR_B)", want: "$(VAR_A)_$(VAR_B)"},
		{in: "f000-$$VAR_A", want: "f000-$VAR_A"},
		{in: `foo\$(VAR_C)bar`, want: `foo\Cbar`},
		{in: "$(VAR_A$(VAR_B))", want: "$(VAR_A$(VAR_B))"},
		{in: "$(VAR_A$(VAR_B)", want: "$(VAR_A$(VAR_B)"},
		{in: "$(VAR_REF)", want: "$(VAR_A)"},
		{in: "foo$(VAR_EMPTY)bar", want: "foobar"},
		{in: "foo$(VAR_Awhoops!", want: "foo$(VAR_Awhoops!"},
		{in: "$?_boo_$!", want: "$?_boo_$!"},
		{in: "$VAR_A", want: "$VAR_A"},
		{in: "${VAR_A}", want: "${VAR_A}"},
		{in: "$(VAR_DNE)", want: "$(VAR_DNE)"},
		{in: "$$$$$$(BIG_MONEY)", want: "$$$(BIG_MONEY)"},
		{in: "$$$$$$$(VAR_A)", want: "$$$A"},
		{in: "$(VAR_B)_______$(A", want: "B_______$(A"},
		{in: "$(VAR_C)_______$(", want: "C_______$("},
		{in: "$(VAR_A)foobarzab$", want: "Afoobarzab$"},
		{in: "--$($($($($--", want: "--$($($($($--"},
		{in: "$(foo$$var)", want: "$(foo$$var)"},
		{in: "prefix-$€-suffix", want: "prefix-$€-suffix"},
		{in: "$中文", want: "$中文"},
		{in: "", want: ""},
	}
	for _, tt := range tests {
		if got := expand(tt.in, lookup); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
