package cluster

import "unicode/utf16"

// JavaStringHash is Java's String.hashCode: s*31^(n-1) + ... over the
// string's UTF-16 code units.
func JavaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// CoordinatorPartition is the partition of __consumer_offsets (a group id)
// or __transaction_state (a transactional id) that holds key's state, as
// Kafka's GroupCoordinatorService.partitionFor and
// TransactionStateManager.partitionFor compute it:
// Utils.abs(key.hashCode()) % partitions, where Utils.abs maps
// Integer.MIN_VALUE to 0.
func CoordinatorPartition(key string, partitions int32) int32 {
	h := JavaStringHash(key)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}
