package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/specprobe/specprobe/probes"
)

func probesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probes",
		Short: "List, show and check probe specs",
	}
	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the engines in the catalog",
		Long: "List the engines in the catalog. On a terminal each description is cut to fit its width;\n" +
			"-o wide adds the MATCHES column (what attach matches a process by) and cuts nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "wide" {
				return fmt.Errorf("--output %q: the only format is wide", output)
			}
			specs, err := probes.Catalog()
			if err != nil {
				return err
			}
			return writeList(os.Stdout, catalogRows(specs), listWidth(os.Stdout), output == "wide")
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "", "wide: every column, nothing cut")
	cmd.AddCommand(list)
	cmd.AddCommand(&cobra.Command{
		Use:   "show ENGINE",
		Short: "Print a catalog spec (a starting point for your own)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := probes.CatalogSource(args[0])
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(src)
			return err
		},
	})
	cmd.AddCommand(checkCmd())
	return cmd
}
