package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/specprobe/specprobe/probes"
)

func probesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probes",
		Short: "List, show and check probe specs",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the engines in the catalog",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			specs, err := probes.Catalog()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ENGINE\tSTAGES\tMATCHES\tDESCRIPTION")
			for _, s := range specs {
				var stages []string
				for _, n := range probes.StageNames {
					if s.Stages[n] != nil {
						stages = append(stages, n)
					}
				}
				match := slices.Concat(s.Match.Exe, s.Match.Cmdline, s.Match.Library)
				for _, m := range s.Match.Module {
					match = append(match, "import "+m)
				}
				desc := s.Description
				if i := strings.Index(desc, ". "); i > 0 {
					desc = desc[:i]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Label(), strings.Join(stages, ","), strings.Join(match, ","), desc)
			}
			return w.Flush()
		},
	})
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
