package main

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
		ok   bool
	}{
		{env: map[string]string{"NBKUBE_MEMORY_LIMIT": "1073741824"}, want: 966367641, ok: true},
		{env: map[string]string{"NBKUBE_MEMORY_LIMIT": "1073741824", "GOMEMLIMIT": "500MiB"}},
		{env: map[string]string{}},
		{env: map[string]string{"NBKUBE_MEMORY_LIMIT": "0"}},
		{env: map[string]string{"NBKUBE_MEMORY_LIMIT": "1Gi"}},
	} {
		got, ok := softMemoryLimit(func(k string) string { return tc.env[k] })
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: %d, %v; want %d, %v", tc.env, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDefaultBodyMemory(t *testing.T) {
	for _, tc := range []struct {
		limit string
		want  int64
	}{
		{"1073741824", 268435456},
		{"", 512 << 20},
		{"0", 512 << 20},
		{"1Gi", 512 << 20},
	} {
		if got := defaultBodyMemory(func(string) string { return tc.limit }); got != tc.want {
			t.Errorf("limit %q: %d, want %d", tc.limit, got, tc.want)
		}
	}
}
