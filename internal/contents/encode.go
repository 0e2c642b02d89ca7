package contents

// EncodeNotebook is nbformat's writes of a notebook given as JSON, as stored or as the API
// returns it: the bytes Save would store (ids repaired, transient fields dropped, lines split,
// keys sorted), without validating. nbconvert's notebook export is this encoding.
func EncodeNotebook(content []byte) ([]byte, error) {
	data, _, err := prepareNotebook(content)
	return data, err
}
