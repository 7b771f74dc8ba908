DROP TABLE IF EXISTS kb_imports;
DROP TABLE IF EXISTS kb_study_profiles;
DROP TABLE IF EXISTS kb_runs;
