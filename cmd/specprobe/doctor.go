package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/specprobe/specprobe/gpu"
	"github.com/specprobe/specprobe/loader"
)

func doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check kernel features, privileges and NVML: what would fail and why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := 0
			for _, c := range loader.Doctor() {
				mark := "ok  "
				if !c.OK {
					mark = "FAIL"
					failed++
				}
				fmt.Printf("%s %-22s %s\n", mark, c.Name, c.Detail)
			}
			// GPU state is optional: its absence is said, not failed.
			mark := "ok  "
			ok, detail := gpu.Describe()
			if !ok {
				mark = "off "
			}
			fmt.Printf("%s %-22s %s\n", mark, "NVML (GPU state)", detail)
			if failed > 0 {
				return fmt.Errorf("%d check(s) failed: attach will not work until they pass", failed)
			}
			return nil
		},
	}
}
