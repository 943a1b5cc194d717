"""NetworkPolicy enforcement for the process runtime: per node, an nftables
table in the node's network namespace that every pod packet crosses (pods are
routed through their node), built from NetworkPolicies, Pods and Namespaces
read through the API with informers, like a CNI's policy agent."""
