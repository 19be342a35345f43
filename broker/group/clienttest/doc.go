// Package clienttest holds end-to-end tests of Cascade's group coordinator
// through three client libraries: franz-go, sarama, and
// confluent-kafka-go over librdkafka (which needs cgo). Each runs the same
// story: three members share a topic, join one after another, one leaves,
// one crashes (it vanishes without LeaveGroup and is expired at its
// session timeout); every record is read, the committed offsets end
// exactly at the partitions' ends, and after a broker restart a new member
// resumes at the committed offsets. TestStaggeredJoin runs franz-go
// members joining an empty group a few hundred milliseconds apart under
// the default group.initial.rebalance.delay.ms, many times over, and
// bounds how long each run takes to read and commit a whole topic. The
// package has no non-test code.
package clienttest
