package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// yamlLine matches the place yaml.v3 gives most syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlAnchor matches yaml.v3's error for an alias of no anchor.
var yamlAnchor = regexp.MustCompile(`^yaml: unknown anchor '([^']*)' referenced`)

// yamlError turns a YAML syntax error into an [*Error] with a line and a
// column, as every other problem has. yaml.v3 names the line of most
// syntax errors but not the column, which is then the column of the
// line's first character that is not a space; it names no place at all
// for a byte YAML forbids (a control character such as NUL or BEL, or
// bytes that are not UTF-8) or for an alias of no anchor, which are then
// found in data. A problem found nowhere is put at the start of the file.
func yamlError(data []byte, file string, err error) *Error {
	msg := err.Error()
	e := &Error{File: file, Line: 1, Column: 1, Msg: "invalid YAML: " + msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil && line > 0 {
			e.Line, e.Column = line, firstColumn(data, line)
			e.Msg = "invalid YAML: " + strings.TrimPrefix(msg, m[0])
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
