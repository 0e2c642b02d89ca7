package nbformat

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

// Validate validates a stored notebook (data, which Read found of minor version minor) as
// nbformat's reader does, after stripping transient fields and repairing cell ids, and
// returns Jupyter's "Notebook validation failed" message, or "" when it is valid. Its
// verdict depends on data alone: a caller may keep it for the file version it read.
func Validate(data []byte, minor int) (string, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return "", fmt.Errorf("decode notebook: %w", err)
	}
	nb, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("decode notebook: not an object")
	}
	if minor >= 5 {
		normalizeIDs(nb)
	}
	stripTransient(nb)
	return validateNotebook(nb)
}

// validateNotebook validates a decoded notebook against the schema of its minor version and
// returns Jupyter's "Notebook validation failed" message, or "" when it is valid.
func validateNotebook(nb map[string]any) (string, error) {
	all, err := loadSchemas()
	if err != nil {
		return "", err
	}
	sch := all.current
	switch _, minor := version(nb); {
	case minor >= 0 && minor < nbformatMinor:
		sch = all.older
	case minor > nbformatMinor:
		sch = all.future
	}
	cells, ok := nb["cells"].([]any)
	if !ok || len(cells) < parallelCells {
		return validationMessage(sch.whole.Validate(any(nb)), nb, nil)
	}
	// The notebook without its cells, then the cells side by side: the schema checks each
	// cell on its own, so this accepts and refuses exactly what one pass does, and reports the
	// first failing cell as one pass does.
	top := make(map[string]any, len(nb))
	for k, v := range nb {
		top[k] = v
	}
	top["cells"] = []any{}
	if msg, err := validationMessage(sch.whole.Validate(any(top)), top, nil); msg != "" || err != nil {
		return msg, err
	}
	errs := make([]error, len(cells))
	workers := min(runtime.GOMAXPROCS(0), len(cells))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := w; i < len(cells); i += workers {
				buf = appendValue(buf[:0], cells[i], 0, nil)
				key := validCellKey{variant: sch.variant, sum: sha256.Sum256(buf)}
				if validCells.has(key) {
					continue
				}
				if errs[i] = sch.cell.Validate(cells[i]); errs[i] == nil {
					validCells.add(key)
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return validationMessage(err, cells[i], []string{"cells", strconv.Itoa(i)})
		}
	}
	return "", nil
}

// parallelCells is the number of cells from which validating them in parallel pays.
const parallelCells = 16

// validCells remembers cells found valid, by their canonical encoding and the schema variant:
// a notebook saved again mostly has the cells it had, and validating them is most of the
// work of a save. A cell's validity depends on its content and the schema only, so the memory
// cannot be stale, nor differ between replicas.
var validCells = newCellSet(1 << 16)

type validCellKey struct {
	variant int
	sum     [sha256.Size]byte
}

// cellSet is a bounded set: when the current generation is full it becomes the previous one,
// and what neither holds is forgotten.
type cellSet struct {
	mu        sync.Mutex
	max       int
	cur, prev map[validCellKey]struct{}
}

func newCellSet(max int) *cellSet {
	return &cellSet{max: max, cur: map[validCellKey]struct{}{}}
}

func (s *cellSet) has(k validCellKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return true
	}
	_, ok := s.prev[k]
	return ok
}

func (s *cellSet) add(k validCellKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.max {
		s.prev, s.cur = s.cur, make(map[validCellKey]struct{}, s.max)
	}
	s.cur[k] = struct{}{}
}
