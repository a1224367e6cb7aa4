// Package e2e holds the end-to-end tests of the Kafka source and sink under
// the engine: a real query process from a Kafka topic to a Kafka topic,
// SIGKILLed at the sink's fault points and restarted on its checkpoint. It
// is a package of its own so the sink's unit tests do not depend on the
// engine building.
package e2e
