// Spark's own parsers of JVM option strings, for tests/lading_spec/test_jvmoptions.py.
// Run as a single-file program with the pyspark jars on the classpath:
//   java -cp "<pyspark>/jars/*" ParseOptions.java < inputs
// Each input line is one option string as UTF-16BE code units in hex. For each, one output line:
// "L <tokens>" from org.apache.spark.launcher.CommandBuilderUtils.parseOptionString (the driver's
// spark-submit) or "L !" where it throws, then "U <tokens>" from org.apache.spark.util.Utils
// .splitCommandString (the executors' SPARK_JAVA_OPT_*); tokens are hex like the input, joined by ",".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

public class ParseOptions {
  static String hex(String s) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < s.length(); i++) out.append(String.format("%04x", (int) s.charAt(i)));
    return out.toString();
  }

  static String unhex(String h) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i + 4 <= h.length(); i += 4) out.append((char) Integer.parseInt(h.substring(i, i + 4), 16));
    return out.toString();
  }

  static String join(Iterable<?> tokens) {
    List<String> parts = new ArrayList<>();
    for (Object t : tokens) parts.add(hex((String) t));
    return String.join(",", parts);
  }

  public static void main(String[] args) throws Exception {
    Method launcher = Class.forName("org.apache.spark.launcher.CommandBuilderUtils")
        .getDeclaredMethod("parseOptionString", String.class);
    launcher.setAccessible(true);
    Method utils = Class.forName("org.apache.spark.util.Utils").getMethod("splitCommandString", String.class);
    Method asJava = Class.forName("scala.jdk.javaapi.CollectionConverters")
        .getMethod("asJava", Class.forName("scala.collection.Seq"));
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "US-ASCII"));
    String line;
    while ((line = in.readLine()) != null) {
      String value = unhex(line.trim());
      try {
        System.out.println("L " + join((List<?>) launcher.invoke(null, value)));
      } catch (java.lang.reflect.InvocationTargetException e) {
        System.out.println("L !");
      }
      System.out.println("U " + join((List<?>) asJava.invoke(null, utils.invoke(null, value))));
    }
  }
}
