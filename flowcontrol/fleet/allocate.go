package fleet

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// allocation is the division of the fleet's budget one round computed.
type allocation struct {
	share int64 // this replica's in-flight budget
	live  int
	bands []BandShare
}

// allocate divides budget among fleet, whose first entry is this replica
// (its live state) and the rest the others as last read, each accepted by
// Replica.Check and with a distinct ID. The rule, written out in
// [View.Gate]'s doc:
//
//  1. In strict priority, highest band first, each band p is granted
//     A_p = min(D_p, what the bands above left of budget), where D_p is the
//     fleet's demand in the band, Σ_r d_rp, and a replica's demand
//     d_rp = waiting_rp + inFlight_rp + Demand_rp × period: what it holds
//     and what is expected to arrive before the next round.
//  2. Replica r's part of A_p is A_p × d_rp / D_p.
//  3. What no band claims is divided in proportion to each replica's
//     smoothed arrival rate (Σ_p Demand_rp), or evenly when no replica has
//     any, so that a replica with nothing waiting can still start an
//     arrival at once.
//  4. Each replica's sum is rounded by largest remainder (ties by ID), so
//     that the integer shares sum to budget exactly and every replica
//     reading the same states computes the same shares.
//  5. This replica's share is capped at budget − Σ_{j≠self} inFlight_j:
//     it never counts on slots another replica is known to hold.
//
// And each band p with a fleet-wide request capacity Q_p in capacities:
// this replica's part is what it holds waiting plus its part of the room,
// Q_p − Σ_r waiting_rp (at least 0), half evenly and half by the band's
// arrival rate on each replica, by largest remainder.
func allocate(budget int64, period time.Duration, capacities map[int]int64, fleet []Replica) allocation {
	self := fleet[0].ID
	fleet = slices.Clone(fleet)
	slices.SortFunc(fleet, func(a, b Replica) int { return strings.Compare(a.ID, b.ID) })
	me := slices.IndexFunc(fleet, func(r Replica) bool { return r.ID == self })

	// The bands of the fleet, highest first.
	var prios []int
	for _, r := range fleet {
		for _, b := range r.Bands {
			prios = append(prios, b.Priority)
		}
	}
	slices.SortFunc(prios, func(a, b int) int { return cmp.Compare(b, a) })
	prios = slices.Compact(prios)
	index := func(p int) int {
		i, _ := slices.BinarySearchFunc(prios, p, func(a, b int) int { return cmp.Compare(b, a) })
		return i
	}

	bands := make([]BandShare, len(prios))
	demand := make([]float64, len(prios))
	expect := func(b Band) float64 { return float64(b.Waiting+b.InFlight) + b.Demand*period.Seconds() }
	for i, p := range prios {
		bands[i].Priority = p
	}
	var othersInFlight int64
	for i, r := range fleet {
		for _, b := range r.Bands {
			k := index(b.Priority)
			bands[k].Waiting += b.Waiting
			bands[k].InFlight += b.InFlight
			demand[k] += expect(b)
			if i != me {
				bands[k].OtherWaiting += b.Waiting
				bands[k].OtherInFlight += b.InFlight
				othersInFlight += b.InFlight
			}
		}
	}

	left := float64(budget)
	granted := make([]float64, len(bands))
	for k := range bands {
		granted[k] = min(demand[k], left)
		bands[k].Granted = int64(math.Round(granted[k]))
		left -= granted[k]
	}

	// Each replica's real-valued part, then the leftover.
	parts := make([]float64, len(fleet))
	var rates float64
	rate := make([]float64, len(fleet))
	for i, r := range fleet {
		for _, b := range r.Bands {
			k := index(b.Priority)
			if d := expect(b); d > 0 {
				x := granted[k] * d / demand[k]
				parts[i] += x
				if i == me {
					bands[k].Share = x
				}
			}
			rate[i] += b.Demand
		}
		rates += rate[i]
	}
	for i := range parts {
		parts[i] += left * spread(rate[i], rates, len(fleet))
	}

	shares := roundShares(budget, parts)
	share := max(0, min(shares[me], budget-othersInFlight))

	for k := range bands {
		bands[k].Capacity = -1
		q, ok := capacities[bands[k].Priority]
		if !ok {
			continue
		}
		room := max(0, q-bands[k].Waiting)
		var mine float64
		var waiting int64
		var sum float64
		weights := make([]float64, len(fleet))
		for i, r := range fleet {
			for _, b := range r.Bands {
				if b.Priority == bands[k].Priority {
					weights[i] = b.Demand
					if i == me {
						waiting = b.Waiting
					}
				}
			}
			sum += weights[i]
		}
		for i := range weights {
			weights[i] = float64(room) * spread(weights[i], sum, len(fleet))
		}
		mine = float64(roundShares(room, weights)[me])
		bands[k].Capacity = min(waiting+int64(mine), MaxCount)
	}
	return allocation{share: share, live: len(fleet), bands: bands}
}

// spread returns a replica's part of what is divided by arrival rate,
// given its rate, the sum of the n replicas' rates: half evenly, half by
// rate (all evenly when no replica has any). The even half keeps every
// replica some room: a replica given none would refuse every arrival, and
// a rate measured from what is admitted and queued would then stay 0.
func spread(rate, rates float64, n int) float64 {
	if rates <= 0 {
		return 1 / float64(n)
	}
	return 0.5/float64(n) + 0.5*rate/rates
}

// roundShares rounds parts, which sum to total, to integers that sum to
// total: each its floor, then one more to the largest fractions, ties in
// index order (the replicas' ID order).
func roundShares(total int64, parts []float64) []int64 {
	shares := make([]int64, len(parts))
	order := make([]int, len(parts))
	var given int64
	for i, x := range parts {
		shares[i] = min(int64(math.Floor(x)), total)
		given += shares[i]
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		fa, fb := parts[a]-math.Floor(parts[a]), parts[b]-math.Floor(parts[b])
		return cmp.Compare(fb, fa)
	})
	for j := 0; given < total && j < len(order); j++ {
		shares[order[j]]++
		given++
	}
	return shares
}
