'use strict'
// Instruments shared by the Node benchmarks (napi-ecosystem.md §4.1):
//   mainThreadCpuMs()  CPU time of the JS (main) thread only. Node 20 has no
//                      process.threadCpuUsage, so it is read from /proc/self/task/<pid>/
//                      (the main thread's tid is the pid): `schedstat` (ns) when readable,
//                      else `stat` utime+stime (clock ticks, 10 ms). null off Linux.
//   startLoopMonitor() event-loop delay: monitorEventLoopDelay({resolution: 1}) AND a 1 ms
//                      setInterval probe that also keeps a timeline of every stall (for the SVG).

const fs = require('node:fs')
const { monitorEventLoopDelay } = require('node:perf_hooks')

const TASK = `/proc/self/task/${process.pid}`
const CLK_TCK = 100 // USER_HZ on Linux

function readSchedstatNs() {
  try {
    return Number(fs.readFileSync(`${TASK}/schedstat`, 'utf8').split(' ')[0])
  } catch {
    return null
  }
}

function readStatTicks() {
  try {
    const stat = fs.readFileSync(`${TASK}/stat`, 'utf8')
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(rest[11]) + Number(rest[12])
  } catch {
    return null
  }
}

const CPU_SOURCE = readSchedstatNs() !== null ? 'schedstat' : readStatTicks() !== null ? 'stat' : null

/** Main-thread CPU time in ms (see header), or null when unavailable. */
function mainThreadCpuMs() {
  if (CPU_SOURCE === 'schedstat') return readSchedstatNs() / 1e6
  if (CPU_SOURCE === 'stat') return (readStatTicks() * 1000) / CLK_TCK
  return null
}

/** `{ schedstatMs, statMs }`: both readings, for the record. */
function mainThreadCpuBoth() {
  const ns = readSchedstatNs()
  const ticks = readStatTicks()
  return { schedstatMs: ns === null ? null : ns / 1e6, statMs: ticks === null ? null : (ticks * 1000) / CLK_TCK }
}

/** Process CPU (all threads: JS, libuv pool, native workers) in ms. */
function processCpuMs() {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/**
 * Starts both event-loop monitors. stop() returns
 * `{ maxMs, p99Ms, p50Ms, meanMs (histogram), probeMaxGapMs, probeP99GapMs, ticks,
 *    stalls: [[startMs, gapMs], …] }` with times relative to start(); a stall is a probe gap
 * of more than `stallMs` (default 2 ms), i.e. the loop ran nothing else for that long.
 */
function startLoopMonitor({ stallMs = 2 } = {}) {
  const histogram = monitorEventLoopDelay({ resolution: 1 })
  histogram.enable()
  let t0 = performance.now()
  let last = t0
  const gaps = []
  const stalls = []
  const probe = setInterval(() => {
    const now = performance.now()
    const gap = now - last
    gaps.push(gap)
    if (gap > stallMs) stalls.push([round2(last - t0), round2(gap)])
    last = now
  }, 1)
  return {
    /**
     * Restarts the statistics and the clock (stall times are relative to the last reset).
     * Resolves 3 ms later: after histogram.reset() the histogram drops the delay of its next
     * timer tick, so a stall that began right away would go unrecorded.
     */
    async reset() {
      histogram.reset()
      await new Promise((resolve) => setTimeout(resolve, 3))
      gaps.length = 0
      stalls.length = 0
      t0 = last = performance.now()
    },
    stop() {
      // The gap still open at stop time counts too.
      const now = performance.now()
      const open = now - last
      if (open > stallMs) stalls.push([round2(last - t0), round2(open)])
      gaps.push(open)
      clearInterval(probe)
      histogram.disable()
      const sorted = Float64Array.from(gaps).sort()
      const count = histogram.count
      return {
        maxMs: count ? histogram.max / 1e6 : 0,
        p99Ms: count ? histogram.percentile(99) / 1e6 : 0,
        p50Ms: count ? histogram.percentile(50) / 1e6 : 0,
        meanMs: count ? histogram.mean / 1e6 : 0,
        probeMaxGapMs: sorted.length ? sorted[sorted.length - 1] : 0,
        probeP99GapMs: sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] : 0,
        ticks: gaps.length,
        stalls,
      }
    },
  }
}

const round2 = (x) => Math.round(x * 100) / 100

/** Percentile (0–100) of a numeric array (nearest rank). */
function percentile(values, p) {
  if (!values.length) return 0
  const sorted = Float64Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
}

/** Peak resident set size of this process so far, MB. */
function peakRssMb() {
  return process.resourceUsage().maxRSS / 1024
}

module.exports = {
  CPU_SOURCE,
  mainThreadCpuMs,
  mainThreadCpuBoth,
  processCpuMs,
  startLoopMonitor,
  percentile,
  peakRssMb,
}
