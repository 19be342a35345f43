// Package clienttest holds end-to-end tests of transactions through
// clients other than franz-go (sarama, and confluent-kafka-go over
// librdkafka, which needs cgo): their transactional producers commit and
// abort against a Cascade broker, and read_committed consumers of two
// client libraries see only committed data and stop at the first offset of
// an open transaction. The franz-go tests live next to the handlers
// (broker/handler/txn_e2e_test.go). The package has no non-test code.
package clienttest
