package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestOwnerLabelValue_IsAValidLabelAndTellsOwnersApart(t *testing.T) {
	owners := []Owner{"ann", "Ann.Lee-2", "ann@example.com", "ann+x", "system:serviceaccount:ci:runner",
		"a-very-long-name-of-someone-who-has-more-than-sixty-three-characters-in-it",
		"u-0123456789abcdef0123456789abcdef01234567", "-ann", "ann_"}
	seen := map[string]Owner{}
	for _, o := range owners {
		v := OwnerLabelValue(o)
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			t.Errorf("%q → %q: %v", o, v, errs)
		}
		if other, ok := seen[v]; ok {
			t.Errorf("%q and %q share %q", o, other, v)
		}
		seen[v] = o
		if OwnerLabelValue(o) != v {
			t.Errorf("%q: not deterministic", o)
		}
	}
	if OwnerLabelValue("ann") != "ann" || OwnerLabelValue("ann@example.com") == "ann@example.com" {
		t.Error("plain names are kept, others digested")
	}
	// The digest of a name never equals a plain name, even one of the digest's form.
	d := OwnerLabelValue("ann@example.com")
	if OwnerLabelValue(Owner(d)) == d {
		t.Errorf("the name %q has the label value of ann@example.com", d)
	}
}
