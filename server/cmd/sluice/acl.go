package main

// sluice acl add|remove|list: ACLs (CreateAcls, DeleteAcls, DescribeAcls;
// KIP-11, KIP-290), as Kafka's kafka-acls.sh --add, --remove and --list
// do, with its flags: principals and hosts (--allow-principal,
// --deny-principal, --allow-host, --deny-host; a principal's host
// defaults to "*"), --operation (repeatable; add defaults to ALL),
// resources (--topic, --group, --transactional-id, --cluster),
// --resource-pattern-type, and the --producer and --consumer
// conveniences. The broker needs authorizer.class.name set (else
// SECURITY_DISABLED).

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(newACLCmd) }

func newACLCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "acl COMMAND",
		Short: "Add, remove or list ACLs (as kafka-acls.sh)",
		Long: `Adds, removes and lists ACLs, as Kafka's kafka-acls.sh --add, --remove
and --list do, with Kafka's APIs (CreateAcls, DeleteAcls, DescribeAcls).
The brokers need authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: add, remove or list")
		},
	}
	c.AddCommand(newACLAddCmd(), newACLRemoveCmd(), newACLListCmd())
	return c
}

// aclFlags are kafka-acls.sh's flags.
type aclFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	topics, groups, txnIDs          []string
	cluster                         bool
	patternType                     string
	producer, consumer, idempotent  bool
}

func addACLFlags(fs *pflag.FlagSet, conveniences bool) *aclFlags {
	f := &aclFlags{}
	fs.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "a `principal` (User:alice, User:*) the ACLs allow (repeatable)")
	fs.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "a `principal` the ACLs deny (repeatable)")
	fs.StringArrayVar(&f.allowHosts, "allow-host", nil, "an IP `address` the allow ACLs apply to (repeatable; default *)")
	fs.StringArrayVar(&f.denyHosts, "deny-host", nil, "an IP `address` the deny ACLs apply to (repeatable; default *)")
	fs.StringArrayVar(&f.operations, "operation", nil, "an `operation`: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All (repeatable)")
	fs.StringArrayVar(&f.topics, "topic", nil, "a `topic` (repeatable; * is every topic)")
	fs.StringArrayVar(&f.groups, "group", nil, "a consumer `group` (repeatable)")
	fs.StringArrayVar(&f.txnIDs, "transactional-id", nil, "a transactional `id` (repeatable)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.StringVar(&f.patternType, "resource-pattern-type", "literal", "literal or prefixed; list and remove also take match and any")
	if conveniences {
		fs.BoolVar(&f.producer, "producer", false, "a producer's ACLs: WRITE, DESCRIBE, CREATE on the topics; WRITE, DESCRIBE on the transactional ids")
		fs.BoolVar(&f.consumer, "consumer", false, "a consumer's ACLs: READ, DESCRIBE on the topics; READ on the groups")
		fs.BoolVar(&f.idempotent, "idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster")
	}
	return f
}

// aclResource is one resource the flags name.
type aclResource struct {
	rt   kmsg.ACLResourceType
	name string
}

// resources are the named resources, in flag order.
func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, l := range []struct {
		rt    kmsg.ACLResourceType
		names []string
	}{{kmsg.ACLResourceTypeTopic, f.topics}, {kmsg.ACLResourceTypeGroup, f.groups}, {kmsg.ACLResourceTypeTransactionalId, f.txnIDs}} {
		for _, n := range l.names {
			out = append(out, aclResource{l.rt, n})
		}
	}
	if f.cluster {
		out = append(out, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	return out
}

func (f *aclFlags) pattern(filter bool) (kmsg.ACLResourcePatternType, error) {
	pt, err := kmsg.ParseACLResourcePatternType(f.patternType)
	ok := err == nil && (pt == kmsg.ACLResourcePatternTypeLiteral || pt == kmsg.ACLResourcePatternTypePrefixed ||
		filter && (pt == kmsg.ACLResourcePatternTypeMatch || pt == kmsg.ACLResourcePatternTypeAny))
	if !ok {
		if filter {
			return 0, usageErrorf("--resource-pattern-type: %q is not literal, prefixed, match or any", f.patternType)
		}
		return 0, usageErrorf("--resource-pattern-type: %q is not literal or prefixed", f.patternType)
	}
	return pt, nil
}

func parseOperations(names []string) ([]kmsg.ACLOperation, error) {
	var out []kmsg.ACLOperation
	for _, n := range names {
		op, err := kmsg.ParseACLOperation(n)
		if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny {
			return nil, usageErrorf("--operation: unknown operation %q", n)
		}
		out = append(out, op)
	}
	return out, nil
}

// aclEntry is an access control entry: who, from where, what, allow or
// deny.
type aclEntry struct {
	principal, host string
	op              kmsg.ACLOperation
	perm            kmsg.ACLPermissionType
}

// entries are the entries for ops: each allow principal with each allow
// host, each deny principal with each deny host (kafka-acls.sh's
// product; hosts default to *).
func (f *aclFlags) entries(ops []kmsg.ACLOperation) []aclEntry {
	var out []aclEntry
	for _, side := range []struct {
		principals, hosts []string
		perm              kmsg.ACLPermissionType
	}{{f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow}, {f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny}} {
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		for _, p := range side.principals {
			for _, h := range hosts {
				for _, op := range ops {
					out = append(out, aclEntry{p, h, op, side.perm})
				}
			}
		}
	}
	return out
}

// bindings are the ACLs add creates (and remove removes when principals
// are given): the resources with the operations (--producer and
// --consumer choose them per resource type, as kafka-acls.sh does).
func (f *aclFlags) bindings(pt kmsg.ACLResourcePatternType) ([]kmsg.CreateACLsRequestCreation, error) {
	if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
		return nil, usageErrorf("--allow-principal or --deny-principal is required")
	}
	ops, err := parseOperations(f.operations)
	if err != nil {
		return nil, err
	}
	resources := f.resources()
	if f.idempotent && !f.producer {
		return nil, usageErrorf("--idempotent goes with --producer")
	}
	if f.producer || f.consumer {
		if len(ops) > 0 || f.cluster {
			return nil, usageErrorf("--producer and --consumer choose the operations: drop --operation and --cluster")
		}
		if f.consumer && (len(f.topics) == 0 || len(f.groups) == 0) {
			return nil, usageErrorf("--consumer needs --topic and --group")
		}
		if f.producer && len(f.topics) == 0 {
			return nil, usageErrorf("--producer needs --topic")
		}
	} else if len(ops) == 0 {
		ops = []kmsg.ACLOperation{kmsg.ACLOperationAll}
	}
	if len(resources) == 0 {
		return nil, usageErrorf("a resource is required: --topic, --group, --transactional-id or --cluster")
	}
	opsFor := func(rt kmsg.ACLResourceType) []kmsg.ACLOperation {
		if !f.producer && !f.consumer {
			return ops
		}
		var out []kmsg.ACLOperation
		switch rt {
		case kmsg.ACLResourceTypeTopic:
			if f.producer {
				out = append(out, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate)
			}
			if f.consumer {
				out = append(out, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)
			}
		case kmsg.ACLResourceTypeTransactionalId:
			if f.producer {
				out = append(out, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
			}
		case kmsg.ACLResourceTypeGroup:
			if f.consumer {
				out = append(out, kmsg.ACLOperationRead)
			}
		}
		return out
	}
	if f.idempotent {
		resources = append(resources, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	var out []kmsg.CreateACLsRequestCreation
	seen := map[string]bool{}
	for _, r := range resources {
		rops := opsFor(r.rt)
		if f.idempotent && r.rt == kmsg.ACLResourceTypeCluster {
			rops = []kmsg.ACLOperation{kmsg.ACLOperationIdempotentWrite}
		}
		for _, e := range f.entries(rops) {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = r.rt, r.name, pt
			c.Principal, c.Host, c.Operation, c.PermissionType = e.principal, e.host, e.op, e.perm
			if k := fmt.Sprint(c.ResourceType, c.ResourceName, c.Principal, c.Host, c.Operation, c.PermissionType); !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

func newACLAddCmd() *cobra.Command {
	c := command("add (--allow-principal P | --deny-principal P)... [--operation OP]... RESOURCE... [--producer] [--consumer]",
		`Adds ACLs (CreateAcls): every principal, with every host of its side, for every operation on every resource. An ACL that exists already is left as it is.`)
	fs := c.Flags()
	f := addACLFlags(fs, true)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		pt, err := f.pattern(false)
		if err != nil {
			return err
		}
		creations, err := f.bindings(pt)
		if err != nil {
			return err
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			req := kmsg.NewPtrCreateACLsRequest()
			req.Creations = creations
			resp, err := req.RequestWith(ctx, a.cl)
			if err != nil {
				return fmt.Errorf("CreateAcls: %w", err)
			}
			w := cmd.OutOrStdout()
			var failed error
			for i, r := range resp.Results {
				if i >= len(creations) {
					break
				}
				cr := creations[i]
				what := describeACL(cr.ResourceType, cr.ResourceName, cr.ResourcePatternType, cr.Principal, cr.Host, cr.Operation, cr.PermissionType)
				if err := brokerErr(kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage); err != nil {
					fmt.Fprintf(w, "Failed %s: %v\n", what, err)
					failed = fmt.Errorf("%s: %w", what, err)
					continue
				}
				fmt.Fprintf(w, "Added %s\n", what)
			}
			return failed
		})
	}
	return c
}

func newACLRemoveCmd() *cobra.Command {
	c := command("remove [(--allow-principal P | --deny-principal P)...] [--operation OP]... [RESOURCE...] [--resource-pattern-type literal|prefixed|match|any]",
		`Removes ACLs (DeleteAcls). With principals: those ACLs exactly; without: every ACL of the resources (with --operation, of those operations).`)
	fs := c.Flags()
	f := addACLFlags(fs, true)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		filters, err := f.deleteFilters()
		if err != nil {
			return err
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Filters = filters
			resp, err := req.RequestWith(ctx, a.cl)
			if err != nil {
				return fmt.Errorf("DeleteAcls: %w", err)
			}
			w := cmd.OutOrStdout()
			var failed error
			n := 0
			for _, r := range resp.Results {
				if err := brokerErr(kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage); err != nil {
					fmt.Fprintf(w, "Failed: %v\n", err)
					failed = err
					continue
				}
				for _, m := range r.MatchingACLs {
					fmt.Fprintf(w, "Removed %s\n", describeACL(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType))
					n++
				}
			}
			if failed == nil && n == 0 {
				fmt.Fprintln(w, "No ACL matched.")
			}
			return failed
		})
	}
	return c
}

// deleteFilters are remove's filters.
func (f *aclFlags) deleteFilters() ([]kmsg.DeleteACLsRequestFilter, error) {
	pt, err := f.pattern(true)
	if err != nil {
		return nil, err
	}
	if len(f.allowPrincipals)+len(f.denyPrincipals) > 0 {
		creations, err := f.bindings(pt)
		if err != nil {
			return nil, err
		}
		var out []kmsg.DeleteACLsRequestFilter
		for _, c := range creations {
			d := kmsg.NewDeleteACLsRequestFilter()
			d.ResourceType, d.ResourceName, d.ResourcePatternType = c.ResourceType, &c.ResourceName, c.ResourcePatternType
			d.Principal, d.Host, d.Operation, d.PermissionType = &c.Principal, &c.Host, c.Operation, c.PermissionType
			out = append(out, d)
		}
		return out, nil
	}
	if f.producer || f.consumer {
		return nil, usageErrorf("--producer and --consumer need --allow-principal")
	}
	rs := f.resources()
	if len(rs) == 0 {
		return nil, usageErrorf("a resource or a principal is required")
	}
	ops, err := parseOperations(f.operations)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		ops = []kmsg.ACLOperation{kmsg.ACLOperationAny}
	}
	var out []kmsg.DeleteACLsRequestFilter
	for _, r := range rs {
		for _, op := range ops {
			d := kmsg.NewDeleteACLsRequestFilter()
			d.ResourceType, d.ResourceName, d.ResourcePatternType = r.rt, &r.name, pt
			d.Operation, d.PermissionType = op, kmsg.ACLPermissionTypeAny
			out = append(out, d)
		}
	}
	return out, nil
}

func newACLListCmd() *cobra.Command {
	c := command("list [RESOURCE...] [--principal P]... [--resource-pattern-type literal|prefixed|match|any]",
		`Lists ACLs (DescribeAcls), grouped by resource pattern. Without a resource, every ACL (of the principals, if given).`)
	fs := c.Flags()
	f := addACLFlags(fs, false)
	principals := fs.StringArray("principal", nil, "only this `principal`'s ACLs (repeatable)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		rs := f.resources()
		pt, err := f.pattern(true)
		if err != nil {
			return err
		}
		if len(rs) == 0 && !fs.Changed("resource-pattern-type") {
			pt = kmsg.ACLResourcePatternTypeAny
		}
		var reqs []*kmsg.DescribeACLsRequest
		ps := []*string{nil}
		if len(*principals) > 0 {
			ps = nil
			for i := range *principals {
				ps = append(ps, &(*principals)[i])
			}
		}
		if len(rs) == 0 {
			rs = []aclResource{{rt: kmsg.ACLResourceTypeAny}}
		}
		for _, r := range rs {
			for _, p := range ps {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType, req.Principal = r.rt, pt, p
				if r.rt != kmsg.ACLResourceTypeAny {
					req.ResourceName = &r.name
				}
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				reqs = append(reqs, req)
			}
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			byPattern := map[string][]string{}
			for _, req := range reqs {
				resp, err := req.RequestWith(ctx, a.cl)
				if err != nil {
					return fmt.Errorf("DescribeAcls: %w", err)
				}
				if err := brokerErr(kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage); err != nil {
					return fmt.Errorf("DescribeAcls: %w", err)
				}
				for _, res := range resp.Resources {
					k := fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", res.ResourceType, res.ResourceName, res.ResourcePatternType)
					for _, acl := range res.ACLs {
						e := fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", acl.Principal, acl.Host, acl.Operation, acl.PermissionType)
						if !slices.Contains(byPattern[k], e) {
							byPattern[k] = append(byPattern[k], e)
						}
					}
				}
			}
			printACLs(cmd.OutOrStdout(), byPattern)
			return nil
		})
	}
	return c
}

// printACLs prints kafka-acls.sh --list's layout.
func printACLs(w io.Writer, byPattern map[string][]string) {
	keys := make([]string, 0, len(byPattern))
	for k := range byPattern {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "Current ACLs for resource `%s`:\n", k)
		es := byPattern[k]
		slices.Sort(es)
		for _, e := range es {
			fmt.Fprintf(w, " \t%s\n", e)
		}
		fmt.Fprintln(w)
	}
}

func describeACL(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) string {
	return fmt.Sprintf("%s %s:%s:%s for %s from %s: %s", strings.ToLower(perm.String()), rt, pt, name, principal, host, op)
}
