package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Set stores val under key in the group's stable store, committed with
// pebble.Sync. Neither slice is retained.
func (s *Store) Set(key, val []byte) error {
	if err := s.db.Set(s.stableKey(key), val, s.write); err != nil {
		return fmt.Errorf("raftlog: group %d: set %q: %w", s.group, key, err)
	}
	s.stats.syncs.Add(1)
	s.synced()
	return nil
}

// Get returns a copy of the value stored under key, which the caller owns
// (an empty value gives an empty, non-nil slice). A key never set gives
// nil and ErrKeyNotFound, unwrapped, as raft expects.
func (s *Store) Get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(s.stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d: get %q: %w", s.group, key, err)
	}
	out := make([]byte, len(v))
	copy(out, v)
	if err := closer.Close(); err != nil {
		return nil, fmt.Errorf("raftlog: group %d: get %q: %w", s.group, key, err)
	}
	return out, nil
}

// SetUint64 stores val under key as 8 bytes big-endian, as Set.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value that SetUint64 stored under key. A key never
// set gives 0 and ErrKeyNotFound, unwrapped, as raft expects; a value that
// is not 8 bytes long gives an error wrapping ErrCorrupt.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: group %d: %q holds %d bytes, not a uint64", ErrCorrupt, s.group, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// stableKey returns the database key of a stable-store key.
func (s *Store) stableKey(key []byte) []byte {
	return append(append(make([]byte, 0, len(s.stable)+len(key)), s.stable...), key...)
}
