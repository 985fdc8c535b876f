// Command specprobe traces speculative decoding in a running inference server.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:   "specprobe",
		Short: "Trace speculative decoding (draft, verify, draft-extend) in a running inference server with eBPF",
		Long: `specprobe attaches to an unmodified inference server process, arms probes on its
draft, verify and draft-extend stages, and turns what they see into per-request
OpenTelemetry spans (spec_draft, spec_verify with num_correct_drafts,
spec_draft_extend), without any change to the server.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(attachCmd(), daemonCmd(), probesCmd(), doctorCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "specprobe:", err)
		os.Exit(1)
	}
}
