package gate

// PriorityHoldbackPolicyName is the type name of [PriorityHoldback]'s
// policy, llm-d-router's.
const PriorityHoldbackPolicyName = "priority-holdback-policy"

// The shapes and domains of [PriorityHoldbackConfig], llm-d-router's
// priority-holdback-policy shape and domain values.
const (
	// ShapeLinear spaces the ceilings evenly between MinCeiling and
	// MaxCeiling (llm-d's only shape).
	ShapeLinear = "linear"
	// DomainRank places each band by its rank among the bands, whatever
	// the priorities' values: equal steps from the highest to the lowest.
	DomainRank = "rank"
	// DomainValue places each band by its priority's value between the
	// lowest and the highest priority: priorities close in value get
	// close ceilings.
	DomainValue = "value"
)

// PriorityHoldbackConfig configures [PriorityHoldback], with
// llm-d-router's priority-holdback-policy parameters. The zero value of a
// field means its default, llm-d's, except MinCeiling, which has none and
// must be set: the zero value, whose MinCeiling of 0 would close the
// lowest band for good, is refused.
type PriorityHoldbackConfig struct {
	// Shape is the curve the ceilings follow between the bands: "linear",
	// the only one (llm-d shape; default "linear").
	Shape string
	// Domain is DomainRank or DomainValue (llm-d domain; default "rank").
	Domain string
	// MinCeiling is the ceiling of the lowest band, in (0, 1) (llm-d
	// minCeiling, required there): the share of the gate's capacity the
	// lowest band may use, such as 0.5. Not 0, which holds the band back
	// whatever the saturation, so that its requests never start.
	MinCeiling float64
	// MaxCeiling is the ceiling of the highest band, in (0, 1] and above
	// MinCeiling (llm-d maxCeiling; default 1).
	MaxCeiling float64
}

// PriorityHoldback returns llm-d-router's priority-holdback-policy: the
// highest band's ceiling is MaxCeiling, the lowest's MinCeiling, and the
// bands between are spaced linearly, by rank or by value. With N bands,
// the band of rank i (0 the highest) and priority p, among priorities from
// pMin to pMax, has the ceiling
//
//	rank:   MaxCeiling − i × (MaxCeiling − MinCeiling) / (N − 1)
//	value:  MinCeiling + (p − pMin) / (pMax − pMin) × (MaxCeiling − MinCeiling)
//
// and a lone band MaxCeiling, as llm-d's single-priority bypass gives it,
// so that one band alone is never held back. For bands 10, 0 and −5 with
// MinCeiling 0.4 and MaxCeiling 1, rank gives 1, 0.7 and 0.4, value gives
// 1, 0.6 and 0.4. The ceilings do not depend on the saturation,
// and they fall as the priority does.
//
// It fails, naming the field, for a Shape or Domain it does not know
// (llm-d's newer "explicit" domain included), a MinCeiling outside (0, 1)
// — 0 included, the zero value's: the lowest band would never start — or
// a MaxCeiling outside (0, 1] (NaN included), or a MinCeiling not below
// MaxCeiling.
func PriorityHoldback(cfg PriorityHoldbackConfig) (UsageLimitPolicy, error) {
	switch cfg.Shape {
	case "", ShapeLinear:
	default:
		return nil, configError("PriorityHoldbackConfig.Shape", "shape", `"`+cfg.Shape+`"`, `want "linear"`)
	}
	if cfg.MaxCeiling == 0 {
		cfg.MaxCeiling = 1
	}
	p := holdback{min: cfg.MinCeiling, max: cfg.MaxCeiling}
	switch cfg.Domain {
	case "", DomainRank:
	case DomainValue:
		p.byValue = true
	default:
		return nil, configError("PriorityHoldbackConfig.Domain", "domain", `"`+cfg.Domain+`"`, `want "rank" or "value"`)
	}
	if cfg.MinCeiling == 0 {
		return nil, configError("PriorityHoldbackConfig.MinCeiling", "minCeiling", 0,
			"unset or 0: the lowest band would be held back whatever the saturation, and its requests would never start; set the share of the gate it may use, above 0")
	}
	if err := checkFraction("PriorityHoldbackConfig.MinCeiling", "minCeiling", cfg.MinCeiling, 0, 1, true, true); err != nil {
		return nil, err
	}
	if err := checkFraction("PriorityHoldbackConfig.MaxCeiling", "maxCeiling", cfg.MaxCeiling, 0, 1, true, false); err != nil {
		return nil, err
	}
	if cfg.MinCeiling >= cfg.MaxCeiling {
		return nil, configError("PriorityHoldbackConfig.MinCeiling", "minCeiling", cfg.MinCeiling, "not below MaxCeiling")
	}
	return p, nil
}

type holdback struct {
	min, max float64
	byValue  bool
}

func (holdback) TypeName() string { return PriorityHoldbackPolicyName }

func (p holdback) Ceiling(_ float64, rank int, priorities []int) float64 {
	n := len(priorities)
	// The ends are exact, MaxCeiling at the top and MinCeiling at the
	// bottom: the interpolation below can round a last bit either way.
	switch {
	case rank == 0 || n <= 1:
		return p.max
	case rank == n-1:
		return p.min
	}
	if p.byValue {
		// Distinct priorities: pMax > pMin. Differences in float64, so
		// that priorities far apart cannot overflow an int.
		pMax, pMin := float64(priorities[0]), float64(priorities[n-1])
		return p.min + (float64(priorities[rank])-pMin)/(pMax-pMin)*(p.max-p.min)
	}
	return p.max - float64(rank)*(p.max-p.min)/float64(n-1)
}
