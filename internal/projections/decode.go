package projections

import (
	"fmt"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The query API decodes every item it answers with; attributevalue.UnmarshalMap does it by
// reflection (a type cache lookup, a field walk and an allocation per field), which was 8 %
// of a list's CPU profile. The decoders below are written for the view shapes and follow
// UnmarshalMap's rules for them: an absent or NULL attribute leaves the zero value, a
// attribute of the wrong type is an error, unknown attributes are ignored, a []string takes
// a list of strings or a string set, a number goes into a string as its text. TestDecodersMatchAttributevalue holds them to it.

// itemDecoder reads typed attributes of one item and keeps the first error.
type itemDecoder struct {
	item Item
	err  error
}

func (d *itemDecoder) fail(name, want string, got types.AttributeValue) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %s: want %s, got %T", name, want, got)
	}
}

func (d *itemDecoder) str(name string, dst *string) {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
	case *types.AttributeValueMemberS:
		*dst = v.Value
	case *types.AttributeValueMemberN: // attributevalue decodes a number into a string as its text
		*dst = v.Value
	default:
		d.fail(name, "S", v)
	}
}

func (d *itemDecoder) int(name string, dst *int64) {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil && d.err == nil {
			d.err = fmt.Errorf("attribute %s: %w", name, err)
		}
		*dst = n
	default:
		d.fail(name, "N", v)
	}
}

func (d *itemDecoder) bool(name string, dst *bool) {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
	case *types.AttributeValueMemberBOOL:
		*dst = v.Value
	default:
		d.fail(name, "BOOL", v)
	}
}

func (d *itemDecoder) attributes(name string, dst *map[string][]string) {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
	case *types.AttributeValueMemberM:
		out := make(map[string][]string, len(v.Value))
		for k, av := range v.Value {
			out[k] = d.strings(name+"."+k, av)
		}
		*dst = out
	default:
		d.fail(name, "M", v)
	}
}

func (d *itemDecoder) strings(name string, av types.AttributeValue) []string {
	switch v := av.(type) {
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberSS:
		return append([]string(nil), v.Value...)
	case *types.AttributeValueMemberL:
		out := make([]string, len(v.Value))
		for i, e := range v.Value {
			switch s := e.(type) {
			case *types.AttributeValueMemberS:
				out[i] = s.Value
			case *types.AttributeValueMemberN:
				out[i] = s.Value
			case *types.AttributeValueMemberNULL:
			default:
				d.fail(name, "S", e)
			}
		}
		return out
	default:
		d.fail(name, "L or SS", av)
		return nil
	}
}

func decodeUser(item Item) (UserView, error) {
	var u UserView
	d := itemDecoder{item: item}
	d.str("id", &u.ID)
	d.str("sk", &u.SK)
	d.str("kind", &u.Kind)
	d.str("user_id", &u.UserID)
	d.str("username", &u.Username)
	d.str("email", &u.Email)
	d.str("first_name", &u.FirstName)
	d.str("last_name", &u.LastName)
	d.bool("is_active", &u.IsActive)
	d.attributes("attributes", &u.Attributes)
	d.int("version", &u.Version)
	d.str("created_at", &u.CreatedAt)
	d.str("config_updated_at", &u.ConfigUpdatedAt)
	d.str("updated_at", &u.UpdatedAt)
	d.int("deleted_membership_rev", &u.DeletedMembershipRev)
	d.bool("is_deleted", &u.IsDeleted)
	d.str("updated_sort", &u.UpdatedSort)
	d.str("last_name_sort", &u.LastNameSort)
	d.str("first_name_sort", &u.FirstNameSort)
	d.str("name_sort", &u.NameSort)
	if v, ok := item["former_names"]; ok && d.err == nil {
		if err := attributevalue.Unmarshal(v, &u.FormerNames); err != nil {
			d.err = fmt.Errorf("attribute former_names: %w", err)
		}
	}
	if d.err != nil {
		return UserView{}, fmt.Errorf("decode user item: %w", d.err)
	}
	return u, nil
}

func decodeGroup(item Item) (GroupView, error) {
	var g GroupView
	d := itemDecoder{item: item}
	d.str("id", &g.ID)
	d.str("sk", &g.SK)
	d.str("kind", &g.Kind)
	d.str("group_id", &g.GroupID)
	d.str("key", &g.Key)
	d.str("name", &g.Name)
	d.str("description", &g.Description)
	d.attributes("attributes", &g.Attributes)
	d.int("version", &g.Version)
	d.str("created_at", &g.CreatedAt)
	d.str("config_updated_at", &g.ConfigUpdatedAt)
	d.str("updated_at", &g.UpdatedAt)
	d.int("last_deleted_version", &g.LastDeletedVersion)
	d.bool("is_deleted", &g.IsDeleted)
	d.str("updated_sort", &g.UpdatedSort)
	d.str("name_sort", &g.NameSort)
	if v, ok := item["former_names"]; ok && d.err == nil {
		if err := attributevalue.Unmarshal(v, &g.FormerNames); err != nil {
			d.err = fmt.Errorf("attribute former_names: %w", err)
		}
	}
	if d.err != nil {
		return GroupView{}, fmt.Errorf("decode group item: %w", d.err)
	}
	return g, nil
}

func decodeMembership(item Item) (MembershipView, error) {
	var m MembershipView
	d := itemDecoder{item: item}
	d.str("id", &m.ID)
	d.str("sk", &m.SK)
	d.str("member_id", &m.MemberID)
	d.str("member_of", &m.MemberOf)
	d.str("username", &m.Username)
	d.str("group_key", &m.GroupKey)
	d.str("group_name", &m.GroupName)
	d.int("version", &m.Version)
	d.int("membership_rev", &m.MembershipRev)
	d.str("added_at", &m.AddedAt)
	d.str("expires_at", &m.ExpiresAt)
	d.bool("is_deleted", &m.IsDeleted)
	d.str("updated_at", &m.UpdatedAt)
	if d.err != nil {
		return MembershipView{}, fmt.Errorf("decode membership item: %w", d.err)
	}
	return m, nil
}
