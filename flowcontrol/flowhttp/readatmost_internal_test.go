package flowhttp

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"pgregory.net/rapid"
)

// readAtMost reads what io.ReadAll(io.LimitReader(r, limit)) reads, and
// fails as it fails, whatever the body, the declared length (right or
// unknown), the limit and the way the reader hands out its bytes.
func TestReadAtMostIsLimitedReadAll(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 3*presizeLimit).Draw(t, "size")
		body := bytes.Repeat([]byte{'x'}, n)
		limit := rapid.Int64Range(1, int64(3*presizeLimit)).Draw(t, "limit")
		length := int64(-1)
		if rapid.Bool().Draw(t, "declared") {
			length = int64(n)
		}
		fail := rapid.Bool().Draw(t, "fails")
		shape := rapid.IntRange(0, 2).Draw(t, "shape")
		reader := func() io.Reader {
			var r io.Reader = bytes.NewReader(body)
			if fail {
				r = io.MultiReader(r, iotest.ErrReader(errors.New("reset")))
			}
			switch shape {
			case 1:
				r = iotest.HalfReader(r)
			case 2:
				r = iotest.DataErrReader(r)
			}
			return r
		}
		want, wantErr := io.ReadAll(io.LimitReader(reader(), limit))
		r := reader()
		got, err := readAtMost(r, limit, length)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("readAtMost: error %v, want %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("readAtMost read %d bytes, want %d", len(got), len(want))
		}
	})
}

// A body of declared length is read into one allocation.
func TestReadAtMostDeclaredLengthAllocatesOnce(t *testing.T) {
	body := bytes.Repeat([]byte{'x'}, 5000)
	var r bytes.Reader
	allocs := testing.AllocsPerRun(50, func() {
		r.Reset(body)
		if _, err := readAtMost(&r, 1<<20, int64(len(body))); err != nil {
			panic(err)
		}
	})
	if allocs != 1 {
		t.Errorf("reading a declared body of %d bytes allocates %v times, want 1", len(body), allocs)
	}
}
