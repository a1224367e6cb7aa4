// Package scaleout holds the multi-process test of package scaleout:
// Kafka (kfake) in a process of its own, worker processes of the
// settlement query joined in one group with checkpoints on S3, killed,
// added and stopped, then audited task by task. The programs it runs live
// in brokerprog and workerprog.
package scaleout
