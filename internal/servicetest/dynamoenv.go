package servicetest

// DynamoEnv is the environment that reaches the installation's tables directly (the
// operator's commands that work on DynamoDB, such as `ssodirctl erasures`).
func (s *Services) DynamoEnv() []string {
	return append(local.Env(), "SSO_TABLE_PREFIX="+s.Prefix)
}
