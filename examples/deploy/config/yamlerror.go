package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// yamlLine matches the place yaml.v3 gives most syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlAnchor matches yaml.v3's error for an alias of no anchor.
var yamlAnchor = regexp.MustCompile(`^yaml: unknown anchor '([^']*)' referenced`)

// parserProblems are the problems yaml.v3's parser reports, as its
// messages spell them (parserc.go), whose line it counts from 0 where its
// scanner's problems count from 1: it gives the line of the mark with
// the 0-based number, so that "yaml: line 2" of a parser error is the
// file's line 3. The line is that of the token the parser could not take
// or, for a block or flow collection, of where the collection begins.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// blockProblems are the parser problems whose line is where the block
// mapping or sequence that could not go on begins, which may be far above
// the line that stopped it.
var blockProblems = map[string]bool{
	"did not find expected key":           true,
	"did not find expected '-' indicator": true,
}

// maxRescanBytes bounds the YAML offendingLine parses again to find a
// problem's line, so that a huge file costs a bounded multiple of itself.
const maxRescanBytes = 4 << 20

// offendingLine returns the line of data, from line from on, that a
// problem found in a block starting at from is on: the first line at
// which the file cut after it fails with the same problem. It returns
// from when no cut does within maxRescanBytes.
func offendingLine(data []byte, from int, problem string) int {
	ends := lineEnds(data)
	parsed := 0
	for l := from; l <= len(ends) && parsed <= maxRescanBytes; l++ {
		prefix := data[:ends[l-1]]
		parsed += len(prefix)
		if err := parseAll(prefix); err != nil {
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil && strings.TrimPrefix(err.Error(), m[0]) == problem {
				return l
			}
		}
	}
	return from
}

// lineEnds returns, for each line of data from the first, the offset just
// past its end (its line feed, if any).
func lineEnds(data []byte) []int {
	var ends []int
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			ends = append(ends, len(data))
			break
		}
		off += nl + 1
		ends = append(ends, off)
	}
	return ends
}

// parseAll parses every YAML document of data and returns the first
// syntax error.
func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// lineCount returns the number of lines of data that hold a character, at
// least 1.
func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return max(n, 1)
}

// yamlError turns a YAML syntax error into an [*Error] with a line and a
// column, as every other problem has. yaml.v3 names the line of most
// syntax errors but not the column, which is then the column of the
// line's first character that is not a space. It names a parser error's
// line one too early (see parserProblems), and a block that cannot go on
// by where the block begins, so that is corrected to the line that
// stops it (see offendingLine); it names no place at all
// for a byte YAML forbids (a control character such as NUL or BEL, or
// bytes that are not UTF-8) or for an alias of no anchor, which are then
// found in data. A problem found nowhere is put at the start of the file.
func yamlError(data []byte, file string, err error) *Error {
	msg := err.Error()
	e := &Error{File: file, Line: 1, Column: 1, Msg: "invalid YAML: " + msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil && line > 0 {
			problem := strings.TrimPrefix(msg, m[0])
			if parserProblems[problem] {
				// yaml.v3 counts a parser error's line from 0 (a
				// scanner error's from 1): the place is one line down,
				// and past the last line only for a file that ends
				// inside a construct, which is then its last line.
				line = min(line+1, lineCount(data))
				if blockProblems[problem] {
					line = offendingLine(data, line, problem)
				}
			}
			e.Line, e.Column = line, firstColumn(data, line)
			e.Msg = "invalid YAML: " + problem
		}
		return e
	}
	if off, what := forbidden(data); off >= 0 {
		e.Line, e.Column = position(data, off)
		e.Msg = "invalid YAML: " + what
		return e
	}
	if m := yamlAnchor.FindStringSubmatch(msg); m != nil {
		if off := bytes.Index(data, []byte("*"+m[1])); off >= 0 {
			e.Line, e.Column = position(data, off)
		}
	}
	return e
}

// forbidden returns the offset of the first character YAML 1.2 does not
// allow in a stream (yaml.v3's reader refuses the same set), and what it
// is; -1 when there is none. Allowed: tab, line feed, carriage return,
// U+0020–U+007E, U+0085, U+00A0–U+D7FF, U+E000–U+FFFD and
// U+10000–U+10FFFF, in valid UTF-8.
func forbidden(data []byte) (int, string) {
	for off := 0; off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return off, fmt.Sprintf("byte 0x%02X is not valid UTF-8", data[off])
		case r == '\t' || r == '\n' || r == '\r',
			r >= 0x20 && r <= 0x7E,
			r == 0x85,
			r >= 0xA0 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD,
			r >= 0x10000 && r <= 0x10FFFF:
		default:
			return off, fmt.Sprintf("control character %U is not allowed", r)
		}
		off += size
	}
	return -1, ""
}

// position returns the line and column, from 1, of byte offset off in
// data; the column counts characters, as yaml.v3's do.
func position(data []byte, off int) (line, col int) {
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// firstColumn returns the column of the first character of line that is
// not a space or a tab, or 1.
func firstColumn(data []byte, line int) int {
	for i := 1; i < line; i++ {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return 1
		}
		data = data[nl+1:]
	}
	if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
		data = data[:nl]
	}
	trimmed := bytes.TrimLeft(data, " \t")
	if len(trimmed) == 0 {
		return 1
	}
	return utf8.RuneCount(data[:len(data)-len(trimmed)]) + 1
}
