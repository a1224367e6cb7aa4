// Command survivor passes every fault point and prints "survived": built
// without the onceflow_faults tag it must, whatever ONCEFLOW_FAULT says;
// built with it, the first armed point kills it.
package main

import (
	"fmt"

	"github.com/onceflow/onceflow/internal/fault"
)

func main() {
	for _, p := range fault.All() {
		fault.Point(p)
	}
	fmt.Println("survived")
}
