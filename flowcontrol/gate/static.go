package gate

// StaticUsageLimitPolicyName is the type name of [StaticUsageLimit]'s
// policy, llm-d-router's.
const StaticUsageLimitPolicyName = "static-usage-limit-policy"

// StaticUsageLimit returns llm-d-router's static-usage-limit-policy: one
// ceiling, threshold, for every band. A threshold of 1 (llm-d's default)
// gates nothing the gate itself would not refuse; below 1 it keeps that
// share of the gate's capacity unused by every band alike — a band ceiling
// that tells no band from another, useful to leave the model servers
// headroom rather than to protect one band. Over several bands it holds
// the highest back as much as the lowest: to keep room for a band, give
// the bands below it lower ceilings ([PriorityHoldback]).
//
//	threshold 0.8:  every band starts while the saturation is below 0.8
//
// It fails for a threshold that is not a fraction in (0, 1] (llm-d
// threshold), NaN included, and for 0, which would hold every band back
// whatever the saturation: no request would ever start.
func StaticUsageLimit(threshold float64) (UsageLimitPolicy, error) {
	if threshold == 0 {
		return nil, configError("StaticUsageLimit threshold", "threshold", 0,
			"every band would be held back whatever the saturation, and no request would ever start; 1, llm-d's default, holds none back")
	}
	if err := checkFraction("StaticUsageLimit threshold", "threshold", threshold, 0, 1, true, false); err != nil {
		return nil, err
	}
	return staticUsageLimit{threshold}, nil
}

type staticUsageLimit struct{ threshold float64 }

func (staticUsageLimit) TypeName() string { return StaticUsageLimitPolicyName }

func (p staticUsageLimit) Ceiling(float64, int, []int) float64 { return p.threshold }
