package main

import "testing"

// TestFitBudgets: --maxclients and --grpc-maxclients are kept when the open
// file limit has room for both beside reservedFDs, else share what is left
// in proportion, each keeping at least one; without a gRPC listener
// --maxclients has it all.
func TestFitBudgets(t *testing.T) {
	parallel(t)
	for _, c := range []struct {
		want, grpcWant int
		files          uint64
		clients, grpc  int
	}{
		{10000, 1024, 1 << 20, 10000, 1024},
		{10000, 1024, 10000 + 1024 + reservedFDs, 10000, 1024},
		{10000, 0, 128, 64, 0},
		{10000, 1024, 128, 59, 5},
		{1000, 1000, 1064, 500, 500},
		{10000, 1, 128, 63, 1},
		{1, 1, 10, 1, 1},
	} {
		clients, grpc := fitBudgets(c.want, c.grpcWant, c.files)
		if clients != c.clients || grpc != c.grpc {
			t.Errorf("fitBudgets(%d, %d, %d files) = %d, %d; want %d, %d", c.want, c.grpcWant, c.files, clients, grpc, c.clients, c.grpc)
		}
	}
}
