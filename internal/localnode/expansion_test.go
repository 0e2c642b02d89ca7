package localnode

import "testing"

func TestExpand_FollowsKubernetesVariableExpansion(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
	lookup := func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
	tests := []struct{ in, want string }{
		{"$(VAR_A)", "A"},
		{"$(VAR_A)-$(VAR_A)", "A-A"},
		{"___$(VAR_B)___", "___B___"},
		{"$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"},
		{"$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"},
		{"$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"},
		{"f000-$$VAR_A", "f000-$VAR_A"},
		{`foo\$(VAR_C)bar`, `foo\Cbar`},
		{"$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"},
		{"$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"},
		{"$(VAR_REF)", "$(VAR_A)"},
		{"foo$(VAR_EMPTY)bar", "foobar"},
		{"foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"},
		{"$?_boo_$!", "$?_boo_$!"},
		{"$VAR_A", "$VAR_A"},
		{"${VAR_A}", "${VAR_A}"},
		{"$(VAR_DNE)", "$(VAR_DNE)"},
		{"$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"},
		{"$$$$$$$(VAR_A)", "$$$A"},
		{"$(VAR_B)_______$(A", "B_______$(A"},
		{"$(VAR_C)_______$(", "C_______$("},
		{"$(VAR_A)foobarzab$", "Afoobarzab$"},
		{"--$($($($($--", "--$($($($($--"},
		{"$(foo$$var)", "$(foo$$var)"},
		{"prefix-$€-suffix", "prefix-$€-suffix"},
		{"$中文", "$中文"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := expand(tt.in, lookup); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
