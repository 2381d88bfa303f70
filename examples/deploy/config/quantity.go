package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Limits on what parseQuantity reads, so that a hostile file costs little:
// more digits or a larger exponent than these cannot name an int64 anyway.
const (
	maxQuantityDigits   = 64
	maxQuantityExponent = 64
)

// quantitySuffixes maps a Kubernetes quantity suffix to its multiplier as a
// power of two and a power of ten.
var quantitySuffixes = map[string]struct{ pow2, pow10 int }{
	"": {0, 0}, "n": {0, -9}, "u": {0, -6}, "m": {0, -3},
	"k": {0, 3}, "M": {0, 6}, "G": {0, 9}, "T": {0, 12}, "P": {0, 15}, "E": {0, 18},
	"Ki": {10, 0}, "Mi": {20, 0}, "Gi": {30, 0}, "Ti": {40, 0}, "Pi": {50, 0}, "Ei": {60, 0},
}

var errQuantity = errors.New(`want a number or a quantity such as "100", "1k", "4Mi", "1.5G" or "1e6"`)

// parseQuantity reads a Kubernetes resource quantity — a decimal number
// with an optional SI suffix (k, M, G, T, P, E; m, u, n), binary suffix (Ki,
// Mi, Gi, Ti, Pi, Ei) or decimal exponent (e6, E-3) — as the whole amount
// Kubernetes' Quantity.Value gives: a fraction rounds up, so "0.5" is 1.
// Negative amounts and amounts past int64 are errors.
func parseQuantity(s string) (int64, error) {
	num, suffix := splitQuantity(s)
	if num == "" {
		return 0, fmt.Errorf("%w, got %q", errQuantity, truncate(s))
	}
	negative := false
	switch num[0] {
	case '+':
		num = num[1:]
	case '-':
		negative = true
		num = num[1:]
	}
	intPart, fracPart, _ := strings.Cut(num, ".")
	digits := intPart + fracPart
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%w, got %q", errQuantity, truncate(s))
	}
	if len(digits) > maxQuantityDigits {
		return 0, fmt.Errorf("%q has too many digits", truncate(s))
	}
	pow2, pow10 := 0, -len(fracPart)
	if m, ok := quantitySuffixes[suffix]; ok {
		pow2, pow10 = m.pow2, pow10+m.pow10
	} else if suffix[0] == 'e' || suffix[0] == 'E' {
		exp, err := strconv.Atoi(suffix[1:])
		if err != nil {
			return 0, fmt.Errorf("%w, got %q", errQuantity, truncate(s))
		}
		if exp > maxQuantityExponent || exp < -maxQuantityExponent {
			return 0, fmt.Errorf("%q is out of range", truncate(s))
		}
		pow10 += exp
	} else {
		return 0, fmt.Errorf("%w: unknown suffix %q", errQuantity, truncate(suffix))
	}

	v, _ := new(big.Int).SetString(digits, 10)
	if v.Sign() == 0 {
		return 0, nil
	}
	if negative {
		return 0, fmt.Errorf("negative amount %q", truncate(s))
	}
	v.Lsh(v, uint(pow2))
	ten := big.NewInt(10)
	if pow10 >= 0 {
		v.Mul(v, new(big.Int).Exp(ten, big.NewInt(int64(pow10)), nil))
	} else {
		den := new(big.Int).Exp(ten, big.NewInt(int64(-pow10)), nil)
		q, r := new(big.Int).QuoRem(v, den, new(big.Int))
		if r.Sign() != 0 {
			q.Add(q, big.NewInt(1)) // round up, as Quantity.Value does
		}
		v = q
	}
	if !v.IsInt64() {
		return 0, fmt.Errorf("%q is out of range (at most %d)", truncate(s), int64(math.MaxInt64))
	}
	return v.Int64(), nil
}

// splitQuantity splits s into its signed number and its suffix: the number
// is the longest prefix of sign, digits and one dot.
func splitQuantity(s string) (num, suffix string) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	dot := false
	for i < len(s) {
		c := s[i]
		if c >= '0' && c <= '9' {
			i++
			continue
		}
		if c == '.' && !dot {
			dot = true
			i++
			continue
		}
		break
	}
	return s[:i], s[i:]
}
