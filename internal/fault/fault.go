package fault

// EnvVar is the environment variable that arms fault points in a binary
// built with Tag. A binary built without it never reads the variable.
const EnvVar = "ONCEFLOW_FAULT"

// Tag is the build tag that compiles the fault points in:
// go build -tags onceflow_faults.
const Tag = "onceflow_faults"
