package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegate/sluice/capacity"
)

// Error is one problem at one place in a configuration file: an unknown
// key, a value of the wrong type or out of range, an unknown policy name,
// a reference to nothing. Parse and Load return every problem they find,
// each an *Error, joined with [errors.Join]; use [errors.As] to reach the
// first.
type Error struct {
	// File is the file's path as given to Load; "" for Parse.
	File string
	// Line and Column locate the offending key or value, from 1. Every
	// problem Parse and Load report has them: a YAML syntax error where
	// yaml.v3 names only the line has the column of that line's first
	// character, and a problem with no place of its own (a byte YAML
	// forbids is found in the file; a value the file does not write is
	// put at the nearest key it does, or at 1:1).
	Line, Column int
	// Path names the value in the file's own spelling, e.g.
	// "flowControl.priorityBands[1].maxRequests"; "" for the document.
	Path string
	// Msg says what is wrong.
	Msg string
}

// Warning is one thing a configuration file asks for that Sluice accepts
// and does not do, at its place in the file: a section, a plugin or a key
// that llm-d-router would honour and Sluice reads past, with what is lost.
// A binary logs each; -check-config prints them.
type Warning struct {
	// File is the file's path as given to Load; "" for Parse.
	File string
	// Line and Column locate the key or list item the warning is about,
	// from 1, as [Error]'s do.
	Line, Column int
	// Path names the value in the file's own spelling, e.g.
	// "plugins[0]" or "schedulingProfiles".
	Path string
	// Msg says what is not done and what that loses.
	Msg string
}

// String formats the warning as [Error.Error] formats a problem:
// "config: FILE:LINE:COL: PATH: MSG".
func (w Warning) String() string {
	e := Error(w)
	return e.Error()
}

// WarningStrings formats each of ws with [Warning.String], for a log.
func WarningStrings(ws []Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// Error formats the problem as "config: FILE:LINE:COL: PATH: MSG", or
// "config: line LINE, column COL: PATH: MSG" when there is no file name.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxErrors bounds the problems one Parse reports; past it the rest are
// summed up in one line.
const maxErrors = 50

// decoder walks a yaml.Node tree and collects the problems it finds.
type decoder struct {
	// at holds the key node of every value read, by path, for problems
	// found once the whole file is read.
	at      map[string]*yaml.Node
	errs    []*Error
	dropped int
	// staleness is where a metricsStalenessThreshold was last read.
	staleness *yaml.Node
	// work counts the values walked, aliases counted each time they are
	// followed; past maxWork the walk stops.
	work  int
	warns []Warning
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	if d.work > maxWork {
		return // past the budget, what is left unread would only mislead
	}
	if len(d.errs) >= maxErrors {
		d.dropped++
		return
	}
	e := &Error{Path: path, Msg: fmt.Sprintf(format, args...), Line: 1, Column: 1}
	// Every problem has a place: the node given, else the key that wrote
	// path or the nearest enclosing one, else the file's start.
	if n == nil || n.Line == 0 {
		n = d.pos(path)
	}
	if n != nil && n.Line > 0 {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// warnf records a warning at n, or else where errorf would put a problem
// with path.
func (d *decoder) warnf(n *yaml.Node, path, format string, args ...any) {
	w := Warning{Path: path, Msg: fmt.Sprintf(format, args...), Line: 1, Column: 1}
	if n == nil || n.Line == 0 {
		n = d.pos(path)
	}
	if n != nil && n.Line > 0 {
		w.Line, w.Column = n.Line, n.Column
	}
	d.warns = append(d.warns, w)
}

// problems counts the problems found so far, those not kept included.
func (d *decoder) problems() int { return len(d.errs) + d.dropped }

// err returns the collected problems, nil when there are none.
func (d *decoder) err(file string) error {
	if len(d.errs) == 0 {
		return nil
	}
	errs := make([]error, 0, len(d.errs)+1)
	for _, e := range d.errs {
		e.File = file
		errs = append(errs, e)
	}
	if d.dropped > 0 {
		errs = append(errs, fmt.Errorf("config: %d more problems not shown", d.dropped))
	}
	return errors.Join(errs...)
}

// maxWork bounds the values one Parse walks. Aliases let a small file name
// a great many values (each band an alias of one with a thousand weights,
// a thousand times); no real configuration comes near.
const maxWork = 100_000

// spend counts n more values walked at node at, and reports false, once
// with an error, when the walk has gone past maxWork.
func (d *decoder) spend(at *yaml.Node, path string, n int) bool {
	if d.work > maxWork {
		return false
	}
	if d.work+n > maxWork {
		d.errorf(at, path, "the file holds, through its aliases, more than %d values", maxWork)
		d.work = maxWork + 1
		return false
	}
	d.work += n
	return true
}

// maxAliasDepth bounds a chain of aliases (an alias of an alias...).
const maxAliasDepth = 16

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasDepth; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or an explicit null, which this
// package reads as "not set", as llm-d-router's JSON decoding does.
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// remember records where the value at path was written.
func (d *decoder) remember(path string, k *yaml.Node) {
	if d.at == nil {
		d.at = map[string]*yaml.Node{}
	}
	d.at[path] = k
}

// pos returns the key node of path, or else of the nearest enclosing path
// that has one; nil when none does.
func (d *decoder) pos(path string) *yaml.Node {
	for {
		if n := d.at[path]; n != nil {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return nil
		}
		path = path[:i]
	}
}

// field is one key a mapping may hold and what reads its value.
type field struct {
	key  string
	read func(n *yaml.Node, path string)
}

// join appends a key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index appends a sequence index to a path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", truncate(n.Value))
		case "!!null":
			return "null"
		}
		return truncate(n.Value)
	}
	return "an alias"
}

func truncate(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// entries walks the keys of mapping n, calling each with its key and value
// node. It reports non-mappings, non-string keys, merge keys and duplicate
// keys itself, and returns false for a node that is not a mapping.
func (d *decoder) entries(n *yaml.Node, path string, each func(k, v *yaml.Node)) bool {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping, got %s", kindName(n))
		return false
	}
	if !d.spend(n, path, len(n.Content)/2) {
		return false
	}
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			d.errorf(k, path, "merge keys (<<) and keys that are not strings are not supported")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, join(path, k.Value), "duplicate key (first at line %d)", first.Line)
			continue
		}
		seen[k.Value] = k
		each(k, v)
	}
	return true
}

// mapping walks mapping n with a fixed set of keys. An unknown key is an
// error that names the known ones (and the closest, if one is close); a
// key whose value is null is skipped as unset.
func (d *decoder) mapping(n *yaml.Node, path string, fields []field) {
	d.entries(n, path, func(k, v *yaml.Node) {
		for _, f := range fields {
			if f.key == k.Value {
				if !isNull(v) {
					p := join(path, k.Value)
					d.remember(p, k)
					f.read(resolve(v), p)
				}
				return
			}
		}
		d.unknownKey(k, path, fields)
	})
}

func (d *decoder) unknownKey(k *yaml.Node, path string, fields []field) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.key
	}
	if best := closest(k.Value, names); best != "" {
		d.errorf(k, join(path, k.Value), "unknown key (did you mean %q?)", best)
		return
	}
	d.errorf(k, join(path, k.Value), "unknown key (known: %s)", strings.Join(names, ", "))
}

// closest returns the name nearest to s by edit distance, if it is within
// a third of s's length (at least 1 and at most 3); else a name that s is
// a good part of (a prefix left out, letters left out: "params" for
// "parameters"); else "".
func closest(s string, names []string) string {
	limit := min(max(len(s)/3, 1), 3)
	best, bestDist := "", limit+1
	for _, n := range names {
		if dist := editDistance(strings.ToLower(s), strings.ToLower(n), limit); dist < bestDist {
			best, bestDist = n, dist
		}
	}
	if best != "" {
		return best
	}
	for _, n := range names {
		if len(s) >= 5 && 2*len(s) >= len(n) && isSubsequence(strings.ToLower(s), strings.ToLower(n)) {
			return n
		}
	}
	return ""
}

// isSubsequence reports whether s is t with some bytes left out.
func isSubsequence(s, t string) bool {
	for i := 0; i < len(t) && s != ""; i++ {
		if t[i] == s[0] {
			s = s[1:]
		}
	}
	return s == ""
}

// editDistance is the Levenshtein distance of a and b, or limit+1 when it
// is more than limit (or either string is long).
func editDistance(a, b string, limit int) int {
	const maxLen = 64
	if len(a) > maxLen || len(b) > maxLen {
		return limit + 1
	}
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sequence walks the items of list n.
func (d *decoder) sequence(n *yaml.Node, path string, each func(i int, item *yaml.Node, path string)) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "want a list, got %s", kindName(n))
		return
	}
	if !d.spend(n, path, len(n.Content)) {
		return
	}
	for i, item := range n.Content {
		p := index(path, i)
		d.remember(p, item)
		each(i, resolve(item), p)
	}
}

// scalar reports whether n is a scalar, and reports it if not.
func (d *decoder) scalar(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "want %s, got %s", want, kindName(n))
		return false
	}
	return true
}

// str reads a string. Only a YAML string will do: a number or a boolean
// where a name belongs is a mistake.
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	if !d.scalar(n, path, "a string") {
		return "", false
	}
	if n.Tag != "!!str" {
		d.errorf(n, path, "want a string, got %s (quote it if it is meant as one)", kindName(n))
		return "", false
	}
	return n.Value, true
}

// integer reads a whole number in [lo, hi].
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if !d.scalar(n, path, "an integer") {
		return 0, false
	}
	var v int64
	if n.Tag != "!!int" || n.Decode(&v) != nil {
		d.errorf(n, path, "want an integer, got %s", kindName(n))
		return 0, false
	}
	if v < lo || v > hi {
		d.errorf(n, path, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return v, true
}

// intValue reads an int in [lo, hi].
func (d *decoder) intValue(n *yaml.Node, path string, lo, hi int64) (int, bool) {
	v, ok := d.integer(n, path, max(lo, math.MinInt), min(hi, math.MaxInt))
	return int(v), ok
}

// float reads a finite number.
func (d *decoder) float(n *yaml.Node, path string) (float64, bool) {
	if !d.scalar(n, path, "a number") {
		return 0, false
	}
	var v float64
	if (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&v) != nil {
		d.errorf(n, path, "want a number, got %s", kindName(n))
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n, path, "want a finite number, got %s", n.Value)
		return 0, false
	}
	return v, true
}

// boolean reads true or false.
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	if !d.scalar(n, path, "true or false") {
		return false, false
	}
	var v bool
	if n.Tag != "!!bool" || n.Decode(&v) != nil {
		d.errorf(n, path, "want true or false, got %s", kindName(n))
		return false, false
	}
	return v, true
}

// duration reads a Go duration string such as "30s" or "1m30s", as
// llm-d-router writes durations (metav1.Duration). A bare 0 is accepted
// as zero; any other bare number is an error, its unit being unknown.
// Negative durations are errors.
func (d *decoder) duration(n *yaml.Node, path string) (time.Duration, bool) {
	if !d.scalar(n, path, `a duration such as "30s"`) {
		return 0, false
	}
	if n.Tag == "!!int" && n.Value == "0" {
		return 0, true
	}
	if n.Tag != "!!str" {
		d.errorf(n, path, `want a duration with a unit, such as "30s" or "250ms", got %s`, kindName(n))
		return 0, false
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, `want a duration such as "30s" or "250ms", got %q`, truncate(n.Value))
		return 0, false
	}
	if v < 0 {
		d.errorf(n, path, "negative duration %s", v)
		return 0, false
	}
	return v, true
}

// quantity reads a non-negative whole amount written as a number or as a
// Kubernetes quantity ("1k", "4Mi", "1.5G", "1e6"), as llm-d-router writes
// its maxRequests and maxBytes.
func (d *decoder) quantity(n *yaml.Node, path string) (int64, bool) {
	if !d.scalar(n, path, "a number or a quantity such as \"4Mi\"") {
		return 0, false
	}
	if n.Tag == "!!int" {
		var v int64
		if n.Decode(&v) != nil {
			d.errorf(n, path, "%s is out of range (at most %d)", truncate(n.Value), int64(math.MaxInt64))
			return 0, false
		}
		if v < 0 {
			d.errorf(n, path, "negative amount %d", v)
			return 0, false
		}
		return v, true
	}
	if n.Tag != "!!str" && n.Tag != "!!float" {
		d.errorf(n, path, "want a number or a quantity such as \"4Mi\", got %s", kindName(n))
		return 0, false
	}
	v, err := parseQuantity(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

// setLimit returns a reader that stores a capacity in dst.
func (d *decoder) setLimit(dst *capacity.Limit) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		if l, ok := d.limit(n, p); ok {
			*dst = l
		}
	}
}

// limit reads a capacity: "unbounded", or an amount as [decoder.quantity]
// reads it, which is a bound (0 included).
func (d *decoder) limit(n *yaml.Node, path string) (capacity.Limit, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "unbounded" {
		return capacity.Unbounded(), true
	}
	v, ok := d.quantity(n, path)
	if !ok {
		return capacity.Limit{}, false
	}
	return capacity.Bounded(v), true
}
