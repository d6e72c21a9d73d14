// pysched-cel evaluates DRA device selectors exactly as kube-scheduler 1.37 does, for pysched.
//
// It links the same code kube-scheduler runs: k8s.io/dynamic-resource-allocation/cel (the CEL
// environment of Kubernetes - base libraries, optional types, the strings, lists, sets, regex,
// quantity, semver, IP/CIDR and URL libraries, bindings - with the DRA device type, the runtime cost
// limit and the same error texts), compiled through the allocator's cache options (no cost
// estimation) with the feature gate it is given (--consumable-capacity: DRAConsumableCapacity,
// on by default from 1.36; the stored-expressions environment kube-scheduler compiles selectors in
// ignores it, so device.allowMultipleAllocations compiles either way and is what the device says). The CEL environment is 1.37.2's; 1.35's differs only in what 1.37 added.
//
// pysched starts it once and talks to it over stdin/stdout, one JSON object per line:
//
//	{"op":"eval","expr":"...","devices":[{"driver":"d","allowMultipleAllocations":true,"attributes":{...},"capacity":{...}}, ...]}
//	  -> {"compileError":"..."} or {"results":[{"match":true}, {"error":"no such key: x"}, ...]}
//	{"op":"compile","expr":"..."} -> {} or {"compileError":"..."}
//	{"op":"version"} -> {"kubernetes":"v0.37.2", "consumableCapacity":false}
//
// allowMultipleAllocations (optional), attributes and capacity are a ResourceSlice device's, as
// the API serves them. A request it
// cannot read gets {"error":"..."}; it never exits on bad input.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// The k8s.io/dynamic-resource-allocation version in go.mod, reported by the version op.
const kubernetesVersion = "v0.37.2"

type device struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type request struct {
	Op      string   `json:"op"`
	Expr    string   `json:"expr"`
	Devices []device `json:"devices"`
}

type result struct {
	Match bool   `json:"match,omitempty"`
	Error string `json:"error,omitempty"`
}

type response struct {
	CompileError       string   `json:"compileError,omitempty"`
	Results            []result `json:"results,omitempty"`
	Error              string   `json:"error,omitempty"`
	Kubernetes         string   `json:"kubernetes,omitempty"`
	ConsumableCapacity *bool    `json:"consumableCapacity,omitempty"`
}

func main() {
	consumable := flag.Bool("consumable-capacity", false,
		"the DRAConsumableCapacity feature gate (alpha and off in 1.35, beta and on from 1.36), given to the CEL cache as kube-scheduler gives it; "+
			"selectors compile in the stored-expressions environment, which declares device.allowMultipleAllocations whatever the gate")
	cacheSize := flag.Int("cache-size", 1024, "compiled expressions kept")
	flag.Parse()

	// As the scheduler plugin builds it: cel.NewCache(n, Features{EnableConsumableCapacity: gate}).
	cache := dracel.NewCache(*cacheSize, dracel.Features{EnableConsumableCapacity: *consumable})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<28)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	enc := json.NewEncoder(out)
	ctx := context.Background()
	for in.Scan() {
		var req request
		var resp response
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			resp.Error = "cannot decode the request: " + err.Error()
		} else {
			switch req.Op {
			case "version":
				resp.Kubernetes, resp.ConsumableCapacity = kubernetesVersion, consumable
			case "compile":
				if expr := cache.GetOrCompile(req.Expr); expr.Error != nil {
					resp.CompileError = expr.Error.Error()
				}
			case "eval":
				expr := cache.GetOrCompile(req.Expr)
				if expr.Error != nil {
					resp.CompileError = expr.Error.Error()
					break
				}
				resp.Results = make([]result, len(req.Devices))
				for i, d := range req.Devices {
					// As 1.37's allocator passes it: the driver, allowMultipleAllocations
					// (pysched sends it with DRAConsumableCapacity on, as 1.35 passed it only
					// then), attributes and capacity; DeviceMatches builds the rest.
					match, _, err := expr.DeviceMatches(ctx, dracel.Device{Driver: d.Driver,
						AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
					if err != nil {
						resp.Results[i].Error = err.Error()
					} else {
						resp.Results[i].Match = match
					}
				}
			default:
				resp.Error = fmt.Sprintf("unknown op %q", req.Op)
			}
		}
		if err := enc.Encode(&resp); err != nil {
			fmt.Fprintln(os.Stderr, "pysched-cel: cannot write the answer:", err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1) // pysched went away
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "pysched-cel: reading requests:", err)
		os.Exit(1)
	}
}
