package config

import (
	"testing"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/ordering"
)

func TestParseBand(t *testing.T) {
	b, err := ParseBand("priority=10,capacity=100,bytes=unbounded,ttl=30s,policy=slo-deadline-ordering-policy,queue=heap")
	if err != nil {
		t.Fatal(err)
	}
	if b.Priority != 10 || b.RequestCapacity != capacity.Bounded(100) || b.ByteCapacity.IsBounded() ||
		b.TTL != 30*time.Second || b.Policy.TypeName() != ordering.SLODeadlinePolicyName || b.Queue != ordering.QueueHeap {
		t.Errorf("parsed %+v", b)
	}
	b, err = ParseBand("priority=-10")
	if err != nil {
		t.Fatal(err)
	}
	if b.Priority != -10 || b.RequestCapacity.IsBounded() || b.Policy != nil {
		t.Errorf("parsed %+v, want band -10, unbounded, default policy", b)
	}
}
