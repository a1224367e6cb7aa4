package iceberg

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// icebergSchema converts a query's Arrow schema to an Iceberg schema with
// field ids 1, 2, … in column order (nested fields numbered after), the
// same ids for the same schema every time. The catalog keeps them when it
// creates the table; a column added later gets the next free id.
func icebergSchema(sc *arrow.Schema) (*ice.Schema, error) {
	s, err := table.ArrowSchemaToIcebergWithFreshIDs(sc, true)
	if err != nil {
		return nil, fmt.Errorf("iceberg: convert the query's schema %s: %w", sc, err)
	}
	return s, nil
}

// schemaPlan compares the query's schema with the table's: the nullable
// columns to add (the one change that evolves the table), or a diff of
// everything else that differs.
func schemaPlan(name string, tbl *ice.Schema, query *arrow.Schema) (add []ice.NestedField, err error) {
	q, err := icebergSchema(query)
	if err != nil {
		return nil, err
	}
	var diff []string
	for _, f := range q.Fields() {
		tf, ok := tbl.FindFieldByName(f.Name)
		switch {
		case !ok && f.Required:
			diff = append(diff, fmt.Sprintf("+ %s: %s NOT NULL (new in the query; only a nullable column can be added)", f.Name, f.Type))
		case !ok:
			add = append(add, f)
		case !tf.Type.Equals(f.Type):
			diff = append(diff, fmt.Sprintf("~ %s: %s (table) → %s (query)", f.Name, tf.Type, f.Type))
		case tf.Required && !f.Required:
			diff = append(diff, fmt.Sprintf("~ %s: NOT NULL (table) → nullable (query)", f.Name))
		}
	}
	for _, tf := range tbl.Fields() {
		if _, ok := q.FindFieldByName(tf.Name); !ok && tf.Required {
			diff = append(diff, fmt.Sprintf("- %s: %s NOT NULL (in the table, not in the query)", tf.Name, tf.Type))
		}
	}
	if len(diff) > 0 {
		return nil, &SchemaChangeError{Table: name, Diff: diff}
	}
	return add, nil
}
