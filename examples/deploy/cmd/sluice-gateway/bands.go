package main

import "sync"

// bandLoad counts a backend's requests in flight by band. Its methods are
// safe for concurrent use; its zero value counts none.
type bandLoad struct {
	mu sync.Mutex
	// n holds the bands with requests in flight; a band leaves it when
	// its count reaches 0, so it holds a few entries, one per band.
	n map[int]int64
}

// add adds d to band's count.
func (l *bandLoad) add(band int, d int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[int]int64{}
	}
	if c := l.n[band] + d; c > 0 {
		l.n[band] = c
	} else {
		delete(l.n, band)
	}
}

// atOrAbove returns the requests in flight of band and the bands above
// it.
func (l *bandLoad) atOrAbove(band int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum int64
	for b, c := range l.n {
		if b >= band {
			sum += c
		}
	}
	return sum
}
