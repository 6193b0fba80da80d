#include "stoker/manifest/jsonl_file.h"

#include <gtest/gtest.h>

#include "test_images.h"

namespace stoker::manifest {
namespace {

using stoker::testing::TempDir;
using stoker::testing::WriteFile;

TEST(JsonlFileTest, IndexesSampleLinesWithTheirLineNumbers) {
  TempDir dir;
  const auto path = dir.path() / "m.jsonl";
  WriteFile(path, std::string("{\"a\":1}\n\n   \n{\"b\":2}\r\n{\"c\":3}"));
  auto file = JsonlFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ((*file)->num_samples(), 3);
  EXPECT_EQ((*file)->Sample(0).text, "{\"a\":1}");
  EXPECT_EQ((*file)->Sample(0).line_number, 1);
  EXPECT_EQ((*file)->Sample(1).text, "{\"b\":2}");  // CR stripped
  EXPECT_EQ((*file)->Sample(1).line_number, 4);
  EXPECT_EQ((*file)->Sample(2).text, "{\"c\":3}");  // no trailing newline
  EXPECT_EQ((*file)->Sample(2).line_number, 5);
  EXPECT_EQ((*file)->SampleKey(1), path.string() + ":4");
}

TEST(JsonlFileTest, MissingFileIsNotFound) {
  auto file = JsonlFile::Open("/nonexistent/dir/m.jsonl");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/dir/m.jsonl"), std::string::npos);
}

TEST(JsonlFileTest, EmptyOrBlankFileIsAManifestError) {
  TempDir dir;
  WriteFile(dir.path() / "empty.jsonl", std::string());
  WriteFile(dir.path() / "blank.jsonl", std::string("\n \n\t\n"));
  for (const char* name : {"empty.jsonl", "blank.jsonl"}) {
    auto file = JsonlFile::Open((dir.path() / name).string());
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), StatusCode::kManifestError);
    EXPECT_NE(file.status().message().find("holds no sample"), std::string::npos);
  }
}

TEST(JsonlFileTest, DirectoryIsAnIOError) {
  TempDir dir;
  auto file = JsonlFile::Open(dir.path().string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace stoker::manifest
