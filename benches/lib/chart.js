'use strict'
// Hand-written SVG: event-loop stalls over time, one lane per contender, same time axis.
// A bar starts when the 1 ms probe last ran and is as wide as the stall; its height is the
// stall on a log scale shared by all lanes. The grey band is how long the export took.

const COLORS = { offloop: '#2a9d8f', otlp: '#457b9d', tusk: '#e76f51' }

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const fmt = (x, d = 0) => Number(x).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

/**
 * @param {{title: string, subtitle?: string, targetMs?: number,
 *          lanes: {name: string, family: string, wallMs: number, maxMs: number,
 *                  spansPerSec: number, stalls: [number, number][]}[]}} o
 * @returns {string} SVG text
 */
function stallChart({ title, subtitle, targetMs, lanes }) {
  const W = 980
  const left = 170
  const right = 190
  const plotW = W - left - right
  const laneH = 42
  const laneGap = 10
  const top = subtitle ? 74 : 56
  const axisH = 34
  const H = top + lanes.length * (laneH + laneGap) + axisH + 8

  const maxWall = Math.max(1, ...lanes.map((l) => l.wallMs))
  const xMaxS = niceCeil(maxWall / 1000)
  const xs = (ms) => left + (ms / 1000 / xMaxS) * plotW
  const maxStall = Math.max(10, ...lanes.map((l) => l.maxMs))
  const yMax = Math.max(10, maxStall * 1.15) // the tallest bar nearly fills its lane
  const yh = (ms) => (ms <= 1 ? 0 : (Math.log10(ms) / Math.log10(yMax)) * laneH)

  const out = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12">`)
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`)
  out.push(`<text x="16" y="26" font-size="16" font-weight="600" fill="#1d3557">${esc(title)}</text>`)
  if (subtitle) out.push(`<text x="16" y="46" fill="#555">${esc(subtitle)}</text>`)
  const grid = [10, 100, 1000, 10000].filter((ms) => ms < yMax)
  out.push(`<text x="${left}" y="${top - 8}" fill="#777" font-size="11">bar height: stall, log scale 1 ms – ${fmtMs(yMax)}; grey lines at ${grid.map((ms) => (ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`)).join(', ')}${targetMs ? `; dashed red: ${targetMs} ms target` : ''}</text>`)
  out.push(`<text x="${W - right + 12}" y="${top - 8}" fill="#777" font-size="11">max stall · spans/s</text>`)

  lanes.forEach((lane, i) => {
    const y0 = top + i * (laneH + laneGap) // lane top
    const base = y0 + laneH
    const color = COLORS[lane.family] || '#888'
    out.push(`<g>`)
    out.push(`<text x="${left - 10}" y="${y0 + laneH / 2 + 4}" text-anchor="end" fill="#222" font-weight="600">${esc(lane.name)}</text>`)
    out.push(`<rect x="${left}" y="${y0}" width="${plotW}" height="${laneH}" fill="#fafafa"/>`)
    out.push(`<rect x="${left}" y="${y0}" width="${Math.max(1, xs(lane.wallMs) - left).toFixed(1)}" height="${laneH}" fill="#ececec"/>`)
    for (const ms of grid) {
      const y = (base - yh(ms)).toFixed(1)
      out.push(`<line x1="${left}" x2="${left + plotW}" y1="${y}" y2="${y}" stroke="#d8d8d8" stroke-width="0.6"/>`)
    }
    if (targetMs) {
      const y = (base - yh(targetMs)).toFixed(1)
      out.push(`<line x1="${left}" x2="${left + plotW}" y1="${y}" y2="${y}" stroke="#c1121f" stroke-width="0.8" stroke-dasharray="4 3"/>`)
    }
    // Merge bars closer than half a pixel into one (keeps the file small, looks the same).
    let pending = null
    const flush = () => {
      if (!pending) return
      const [x, w, h] = pending
      out.push(`<rect x="${x.toFixed(1)}" y="${(base - h).toFixed(1)}" width="${Math.max(0.8, w).toFixed(1)}" height="${h.toFixed(1)}" fill="${color}"/>`)
      pending = null
    }
    for (const [start, gap] of lane.stalls) {
      const x = xs(start)
      const w = xs(start + gap) - x
      const h = yh(gap)
      if (pending && x - (pending[0] + pending[1]) < 0.5) {
        pending[1] = x + w - pending[0]
        pending[2] = Math.max(pending[2], h)
      } else {
        flush()
        pending = [x, w, h]
      }
    }
    flush()
    out.push(`<line x1="${left}" x2="${left + plotW}" y1="${base}" y2="${base}" stroke="#999" stroke-width="0.8"/>`)
    const maxColor = targetMs && lane.maxMs <= targetMs ? '#2a7d2a' : '#222'
    out.push(`<text x="${W - right + 12}" y="${y0 + laneH / 2 + 4}" fill="${maxColor}"><tspan font-weight="600">${fmtMs(lane.maxMs)}</tspan> · ${fmt(lane.spansPerSec)} spans/s</text>`)
    out.push(`</g>`)
  })

  const axisY = top + lanes.length * (laneH + laneGap) + 4
  out.push(`<line x1="${left}" x2="${left + plotW}" y1="${axisY}" y2="${axisY}" stroke="#555"/>`)
  const step = niceStep(xMaxS)
  for (let s = 0; s <= xMaxS + 1e-9; s += step) {
    const x = xs(s * 1000).toFixed(1)
    out.push(`<line x1="${x}" x2="${x}" y1="${axisY}" y2="${axisY + 4}" stroke="#555"/>`)
    out.push(`<text x="${x}" y="${axisY + 16}" text-anchor="middle" fill="#555">${fmt(s, step < 1 ? 1 : 0)} s</text>`)
  }
  out.push(`<text x="${left + plotW / 2}" y="${axisY + 30}" text-anchor="middle" fill="#555">time since the first export() (grey: until the last span was written)</text>`)
  out.push(`</svg>`)
  return out.join('\n') + '\n'
}

function fmtMs(ms) {
  if (ms >= 10000) return `${fmt(ms / 1000)} s`
  if (ms >= 1000) return `${fmt(ms / 1000, ms % 1000 ? 2 : 0)} s`
  if (ms >= 100) return `${fmt(ms)} ms`
  return `${fmt(ms, 1)} ms`
}

function niceCeil(x) {
  for (const m of [0.5, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200, 300]) if (x <= m) return m
  return Math.ceil(x / 100) * 100
}

function niceStep(x) {
  const raw = x / 8
  for (const s of [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]) if (raw <= s) return s
  return 100
}

module.exports = { stallChart }
