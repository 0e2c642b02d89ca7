package identity

// CacheKeys are the keys a cache holds, for tests that check what they are made of.
func CacheKeys(c *Cache) []string {
	var out []string
	for _, k := range c.entries.Keys() {
		out = append(out, k.(string))
	}
	return out
}
