package main

import (
	"strings"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	s := &Summary{Options: map[string]string{"timeout": "20s"}, Runs: []Run{
		{Run: 1, Completed: true, FullAfter: 0.9, ServedAfter: 0.8, SteadyP99: 3000, CleanStop: true},
		{Run: 2, Completed: true, FullAfter: 1.1, ServedAfter: 0.9, SteadyP99: 4000, CleanStop: true},
		{Run: 3, Completed: true, FullAfter: 2.5, ServedAfter: 1.0, SteadyP99: 5000},
	}}
	s.evaluate(2 * time.Second)
	if s.MedianFull != 1.1 || s.MaxFull != 2.5 || s.MedianServed != 0.9 || s.MedianP99 != 4000 || s.GoalMet || s.CleanStops != 2 {
		t.Fatalf("%+v", s)
	}
	s.Runs = s.Runs[:2]
	s.evaluate(2 * time.Second)
	if !s.GoalMet || s.MedianFull != 1.0 {
		t.Fatalf("%+v", s)
	}
	s.Runs = append(s.Runs, Run{Run: 3})
	s.evaluate(2 * time.Second)
	if s.GoalMet || !strings.Contains(s.markdown(), "not within 20s") {
		t.Fatalf("an incomplete run met the goal:\n%s", s.markdown())
	}
}
